import { describe, expect, it } from 'vitest';
import {
  DEFAULT_HISTORY_RETENTION_DAYS,
  DEFAULT_STATUS_FEED_RETENTION_DAYS,
  DEFAULT_STRIPE_EVENTS_RETENTION_DAYS,
  loadConfig,
} from '../../src/runtime/config.js';

describe('configuration of retention', () => {
  it('keeps Stripe events 30 days and history 400 by default, and never Stripe events less than a week', () => {
    const config = loadConfig({});
    expect([config.stripeEventsRetentionDays, config.historyRetentionDays]).toEqual([
      DEFAULT_STRIPE_EVENTS_RETENTION_DAYS,
      DEFAULT_HISTORY_RETENTION_DAYS,
    ]);
    expect([DEFAULT_STRIPE_EVENTS_RETENTION_DAYS, DEFAULT_HISTORY_RETENTION_DAYS]).toEqual([30, 400]);
    expect(
      loadConfig({ DUNWALL_STRIPE_EVENTS_RETENTION_DAYS: '7', DUNWALL_HISTORY_RETENTION_DAYS: '0' }),
    ).toMatchObject({
      stripeEventsRetentionDays: 7,
      historyRetentionDays: 0,
    });
    expect(() => loadConfig({ DUNWALL_STRIPE_EVENTS_RETENTION_DAYS: '3' })).toThrow(
      'DUNWALL_STRIPE_EVENTS_RETENTION_DAYS',
    );
    expect(() => loadConfig({ DUNWALL_HISTORY_RETENTION_DAYS: '-1' })).toThrow('DUNWALL_HISTORY_RETENTION_DAYS');
  });

  it("keeps the status feed's changes 7 days by default, at least one", () => {
    expect(loadConfig({}).statusFeedRetentionDays).toBe(DEFAULT_STATUS_FEED_RETENTION_DAYS);
    expect(DEFAULT_STATUS_FEED_RETENTION_DAYS).toBe(7);
    expect(loadConfig({ DUNWALL_STATUS_FEED_RETENTION_DAYS: '30' }).statusFeedRetentionDays).toBe(30);
    expect(() => loadConfig({ DUNWALL_STATUS_FEED_RETENTION_DAYS: '0' })).toThrow('DUNWALL_STATUS_FEED_RETENTION_DAYS');
  });
});

describe('configuration of the store bound of a request', () => {
  it('bounds a request at 4 s by default, below the 5 s within which a frozen store must be answered for, and checks the value', () => {
    expect(loadConfig({}).storeRequestTimeoutMs).toBe(4_000);
    expect(loadConfig({ DUNWALL_STORE_REQUEST_TIMEOUT_MS: '750' }).storeRequestTimeoutMs).toBe(750);
    expect(() => loadConfig({ DUNWALL_STORE_REQUEST_TIMEOUT_MS: '50' })).toThrow(
      'DUNWALL_STORE_REQUEST_TIMEOUT_MS must be an integer from 100 to 25000',
    );
    expect(() => loadConfig({ DUNWALL_STORE_REQUEST_TIMEOUT_MS: '60000' })).toThrow('DUNWALL_STORE_REQUEST_TIMEOUT_MS');
    expect(() => loadConfig({ DUNWALL_STORE_REQUEST_TIMEOUT_MS: '2s' })).toThrow('DUNWALL_STORE_REQUEST_TIMEOUT_MS');
  });
});

describe('configuration of console sessions', () => {
  it('lasts 8 hours by default, from a quarter of an hour to a week', () => {
    expect(loadConfig({}).consoleSessionTtlMs).toBe(8 * 3_600_000);
    expect(loadConfig({ DUNWALL_CONSOLE_SESSION_TTL_MS: '3600000' }).consoleSessionTtlMs).toBe(3_600_000);
    expect(() => loadConfig({ DUNWALL_CONSOLE_SESSION_TTL_MS: '60000' })).toThrow(
      'DUNWALL_CONSOLE_SESSION_TTL_MS must be an integer from 900000 to 604800000',
    );
    expect(() => loadConfig({ DUNWALL_CONSOLE_SESSION_TTL_MS: '8h' })).toThrow('DUNWALL_CONSOLE_SESSION_TTL_MS');
  });
});

describe("configuration of Stripe's API", () => {
  it('calls api.stripe.com by default; https anywhere, http to a loopback address only', () => {
    expect(loadConfig({}).stripeApiUrl).toBe('https://api.stripe.com');
    expect(loadConfig({ DUNWALL_STRIPE_API_URL: 'http://127.0.0.1:12111/' }).stripeApiUrl).toBe(
      'http://127.0.0.1:12111',
    );
    expect(loadConfig({ DUNWALL_STRIPE_API_URL: 'https://stripe-proxy.internal' }).stripeApiUrl).toBe(
      'https://stripe-proxy.internal',
    );
    expect(() => loadConfig({ DUNWALL_STRIPE_API_URL: 'http://stripe-proxy.internal' })).toThrow(
      /DUNWALL_STRIPE_API_URL may use http:\/\/ only for localhost/,
    );
    expect(() => loadConfig({ DUNWALL_STRIPE_API_URL: 'not a url' })).toThrow(/DUNWALL_STRIPE_API_URL must be/);
  });
});
