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

/** The admin API answered with an error (a problem+json body, or something else). */
export class ApiError extends CliError {
  readonly status: number;
  readonly code: string;
  readonly detail: string;

  constructor(status: number, code: string, detail: string) {
    super(`${code}: ${detail}`, EXIT_FAILURE);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
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
