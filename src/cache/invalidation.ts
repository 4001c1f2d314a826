/** What a committed write may have changed in a lookup's answer. */
export type Invalidation =
  | { kind: 'subscriber'; tenantId: number; customerId: string }
  | { kind: 'tenant'; tenantId: number; slug: string | null }
  | { kind: 'all' };

export const INVALIDATION_CHANNEL = 'dunwall_invalidate';

/** The payload the triggers of migration 003 send; null for anything else. */
export function parseInvalidation(payload: string): Invalidation | null {
  if (payload === '*') return { kind: 'all' };
  const kind = payload[0];
  const rest = payload.slice(2);
  const colon = rest.indexOf(':');
  const id = Number(colon < 0 ? rest : rest.slice(0, colon));
  if (payload[1] !== ':' || !Number.isSafeInteger(id) || id <= 0) return null;
  const tail = colon < 0 ? '' : rest.slice(colon + 1);
  if (kind === 's' && tail !== '') return { kind: 'subscriber', tenantId: id, customerId: tail };
  if (kind === 't') return { kind: 'tenant', tenantId: id, slug: tail === '' ? null : tail };
  return null;
}
