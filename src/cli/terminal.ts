/**
 * What the command prints of the service's answers reaches a terminal: a string there is
 * data, never a control. A receiver's redirect, an error a remote host caused or a decline
 * code is whatever its sender put in it, so before anything is printed every character a
 * terminal would act on is written as `\uXXXX`: the C0 controls (line breaks and tabs too,
 * so that a value cannot forge a line of a table), DEL, the C1 controls (U+0080..U+009F,
 * which terminals may take for ESC sequences: U+009B is CSI) and the Unicode characters
 * that break lines or reorder text (U+2028, U+2029, the bidirectional marks, embeddings,
 * overrides and isolates). `--json` output is escaped the same way: JSON for the same value.
 */

// The characters matched are the point: they are written out, never printed.
// eslint-disable-next-line no-control-regex
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069]/g;

function escape(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;
}

/** `text` with every character a terminal would act on written as `\uXXXX`. */
export function terminalText(text: string): string {
  return text.replace(UNSAFE, escape);
}

/** `value` with every string in it (object keys too) passed through `terminalText`: what the formatters get. */
export function terminalSafe<T>(value: T): T {
  if (typeof value === 'string') return terminalText(value) as T;
  if (Array.isArray(value)) return value.map((item: unknown) => terminalSafe(item)) as T;
  if (typeof value === 'object' && value !== null) {
    const safe: Record<string, unknown> = {};
    for (const [key, item] of Object.entries(value))
      Object.defineProperty(safe, terminalText(key), {
        value: terminalSafe(item),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return safe as T;
  }
  return value;
}

/**
 * `value` as indented JSON for a terminal. JSON.stringify writes the C0 controls inside
 * strings as escapes, and its own line breaks are the only ones it leaves; what else it
 * leaves raw (DEL, C1, the Unicode controls) is escaped line by line, as JSON escapes.
 */
export function terminalJson(value: unknown, indent?: number): string {
  return JSON.stringify(value, null, indent).split('\n').map(terminalText).join('\n');
}
