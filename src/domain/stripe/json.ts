/** Reading Stripe's JSON without trusting its shape: each field is what it claims, or null. */

export type Obj = Record<string, unknown>;

/** A JSON object (not an array), or null. */
export function obj(value: unknown): Obj | null {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Obj) : null;
}

/** A non-empty string, or null. */
export function str(value: unknown): string | null {
  return typeof value === 'string' && value !== '' ? value : null;
}
