/** Exit codes of the `dunwall` command. */
export const EXIT_OK = 0;
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** An expected failure: `run` prints `dunwall: <message>` on one line and exits with `exitCode`. */
export class CliError extends Error {
  readonly exitCode: number;

  constructor(message: string, exitCode: number) {
    super(message);
    this.name = 'CliError';
    this.exitCode = exitCode;
  }
}

/** The command line itself is wrong; the message ends with a hint to read the help. */
export class UsageError extends CliError {
  constructor(message: string) {
    super(`${message}. Run 'dunwall help' for usage.`, EXIT_USAGE);
    this.name = 'UsageError';
  }
}

/** The environment is wrong or incomplete (no admin token, bad DUNWALL_URL, invalid configuration). */
export class ConfigurationError extends CliError {
  constructor(message: string) {
    super(message, EXIT_USAGE);
    this.name = 'ConfigurationError';
  }
}

/**
 * The admin API answered with an error (a problem+json body, or something else). A 429
 * says how long to wait, from its Retry-After (`retryAfterS`), rather than its detail.
 */
export class ApiError extends CliError {
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly retryAfterS: number | null;

  constructor(status: number, code: string, detail: string, retryAfterS: number | null = null) {
    super(
      status === 429
        ? `rate limited; retry ${retryAfterS === null ? 'later' : `in ${retryAfterS} s`}`
        : `${code}: ${detail}`,
      EXIT_FAILURE,
    );
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
    this.retryAfterS = retryAfterS;
  }
}

const IMF_FIXDATE = /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/;

/**
 * Retry-After in whole seconds: delay-seconds, or an HTTP-date counted from `nowMs` (RFC
 * 9110, section 10.2.3); null when absent or neither.
 */
export function retryAfterSeconds(value: string | null, nowMs: number): number | null {
  if (value === null) return null;
  const text = value.trim();
  if (/^\d{1,9}$/.test(text)) return Number(text);
  // IMF-fixdate only (`Sun, 06 Nov 1994 08:49:37 GMT`): Date.parse alone takes far more.
  if (!IMF_FIXDATE.test(text)) return null;
  const at = Date.parse(text);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - nowMs) / 1000));
}

/** The admin API could not be reached, or did not answer in time. */
export class NetworkError extends CliError {
  constructor(message: string) {
    super(message, EXIT_FAILURE);
    this.name = 'NetworkError';
  }
}

/** One line, whatever the message holds. */
export function oneLine(text: string): string {
  return text.replace(/\s*[\r\n]+\s*/g, ' ').trim();
}
