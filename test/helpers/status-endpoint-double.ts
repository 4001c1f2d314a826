import type { Dunwall, StatusAnswer } from '../../packages/node/src/types.js';

/**
 * A TEST DOUBLE of `Dunwall`, not `createDunwall`: it answers `status()` synchronously from
 * what it last read of `GET /v1/subscribers/:id/status` on a real service, for the customers
 * a test asked it to `refresh`. It follows no feed and knows nothing of staleness: every
 * answer is `source: "feed"`. It stands in for the copy so that the middleware's tests
 * depend on the `Dunwall` interface only.
 */
export class StatusEndpointDouble implements Dunwall {
  private readonly answers = new Map<string, StatusAnswer>();

  constructor(
    private readonly baseUrl: string,
    private readonly secretKey: string,
  ) {}

  async refresh(customerIds: readonly string[]): Promise<void> {
    for (const id of customerIds) {
      const res = await fetch(`${this.baseUrl}/v1/subscribers/${encodeURIComponent(id)}/status`, {
        headers: { authorization: `Bearer ${this.secretKey}` },
        signal: AbortSignal.timeout(10_000),
      });
      if (res.status !== 200) throw new Error(`status of ${id}: ${res.status} ${await res.text()}`);
      const body = (await res.json()) as { status: StatusAnswer['status']; lockout_at?: string; pay_url?: string; entitlements?: Record<string, boolean> };
      this.answers.set(id, {
        status: body.status,
        lockout_at: body.lockout_at ?? null,
        pay_url: body.pay_url ?? null,
        entitlements: body.entitlements ?? {},
        source: 'feed',
      });
    }
  }

  status(customerId: string): StatusAnswer {
    return this.answers.get(customerId) ?? { status: 'active', lockout_at: null, pay_url: null, entitlements: {}, source: 'feed' };
  }

  async ready(): Promise<void> {}

  async close(): Promise<void> {}
}
