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

function hasEscapable(text: string): boolean {
  return text.includes('\\') || text.includes('\u0000');
}

/**
 * A signed Stripe event is kept whatever its strings hold: refusing one would have Stripe
 * retry it for three days and never store it. PostgreSQL's text and jsonb cannot hold
 * U+0000, which a Stripe user may type into any field, so every string of an event is
 * escaped once, as the event comes in: a backslash is written `\\` and U+0000 `\u0000`
 * (as JSON writes them). What is stored then holds no U+0000, and `unescapeStored` gives
 * Stripe's string back exactly. The escape leaves a string holding neither character as it
 * is, and keeps different strings different, so the derivation reads an escaped event as it
 * would the original: every id, code and status it knows holds neither character, and its
 * patterns refuse both forms alike.
 */
export function escapeStored(text: string): string {
  if (!hasEscapable(text)) return text;
  return text.replaceAll('\\', '\\\\').replaceAll('\u0000', '\\u0000');
}

/** The string `escapeStored` was given: `\\` and `\u0000` read back; any other text as it is. */
export function unescapeStored(text: string): string {
  if (!text.includes('\\')) return text;
  return text.replace(/\\(\\|u0000)/g, (_, escaped: string) => (escaped === '\\' ? '\\' : '\u0000'));
}

/**
 * `value` (parsed JSON) with every string, keys included, escaped (`escapeStored`); the same
 * value when none needs it, as nearly every event. Iterative, not recursive: a signed event
 * nested deep must not overflow the stack and fail the write.
 */
export function escapeStrings<T>(value: T): T {
  if (!needsEscape(value)) return value;
  const root: Record<string, unknown> = { value };
  const stack: [Record<string | number, unknown>, string | number][] = [[root, 'value']];
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [holder, key] = top;
    const item = holder[key];
    if (typeof item === 'string') {
      holder[key] = escapeStored(item);
    } else if (Array.isArray(item)) {
      const copy: unknown[] = [...(item as unknown[])];
      holder[key] = copy;
      for (let i = 0; i < copy.length; i += 1) stack.push([copy as unknown as Record<number, unknown>, i]);
    } else if (typeof item === 'object' && item !== null) {
      const copy: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(item)) {
        // Defined, not assigned: a key `__proto__` (JSON.parse makes it an own property) stays one.
        Object.defineProperty(copy, escapeStored(k), {
          value: v,
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      holder[key] = copy;
      for (const k of Object.keys(copy)) stack.push([copy, k]);
    }
  }
  return root.value as T;
}

function needsEscape(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const item = stack.pop();
    if (typeof item === 'string') {
      if (hasEscapable(item)) return true;
    } else if (Array.isArray(item)) {
      for (const v of item as unknown[]) stack.push(v);
    } else if (typeof item === 'object' && item !== null) {
      for (const [k, v] of Object.entries(item)) {
        if (hasEscapable(k)) return true;
        stack.push(v);
      }
    }
  }
  return false;
}
