import { describe, expect, it } from 'vitest';
import { DEFAULT_TEXTS, localeChain, resolveText, textsFor } from '@dunwall/core';

/**
 * The texts a banner or a gate says, in the snippet, React and React Native alike: the
 * branding's in the reader's language (each language, then its shorter tag, then default),
 * the app's own over them, and the locale the countdown speaks.
 */
const BRANDING = {
  texts: {
    default: { gate_title: 'Your subscription is paused', gate_action: 'Pay now' },
    fr: { gate_title: 'Votre abonnement est suspendu', gate_action: 'Payer' },
    'fr-CA': { gate_action: 'Payer maintenant' },
  },
};

describe('the texts a reader gets', () => {
  it("follows the reader's languages, then each one's shorter tag, then default", () => {
    expect(localeChain(['fr-CA', 'en-US'])).toEqual(['fr-CA', 'fr', 'en-US', 'en', 'default']);
    const gate = (languages: string[]) => {
      const { texts } = textsFor(BRANDING, languages);
      return [texts.lockoutTitle, texts.pay];
    };
    expect(gate(['fr-CA'])).toEqual(['Votre abonnement est suspendu', 'Payer maintenant']);
    expect(gate(['fr-FR', 'en'])).toEqual(['Votre abonnement est suspendu', 'Payer']);
    expect(gate(['de'])).toEqual(['Your subscription is paused', 'Pay now']);
    expect(textsFor({}, ['fr']).texts).toEqual(DEFAULT_TEXTS);
  });

  it("puts the app's own texts over the branding's", () => {
    expect(textsFor(BRANDING, ['fr'], { lockoutTitle: 'En pause' }).texts.lockoutTitle).toBe('En pause');
  });

  it('names the locale each text came from, for the countdown to speak its language', () => {
    const branding = {
      texts: { default: { banner_countdown: 'Paused {time}.' }, fr: { banner_countdown: 'Suspendu {time}.' } },
    };
    expect(resolveText(branding, ['fr-FR'], 'banner_countdown')).toEqual(['Suspendu {time}.', 'fr']);
    expect(resolveText(branding, ['de-DE'], 'banner_countdown')).toEqual(['Paused {time}.', 'default']);
    expect(resolveText(branding, ['de-DE'], 'pay_action')).toBeUndefined();
    expect(textsFor(branding, ['fr-FR', 'en']).locales).toEqual(['fr', 'fr-FR', 'en']);
    expect(textsFor(branding, ['de-DE']).locales).toEqual(['de-DE']);
    expect(textsFor({}, ['de-DE']).locales).toEqual(['en']);
  });
});
