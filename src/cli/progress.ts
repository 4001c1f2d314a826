import type { TextOutput } from './io.js';

/** Redraws at most this often on a terminal: a bar is for eyes, not for every object. */
const REDRAW_INTERVAL_MS = 100;
const BAR_WIDTH = 24;

export interface Progress {
  /**
   * The work so far: `fraction` done (0..1; null when the total is unknown) and a short
   * text. `milestone`: a point worth a line of its own when the output is not a terminal.
   */
  report(fraction: number | null, text: string, milestone?: boolean): void;
  /** Leaves the last state on screen (a terminal) and ends the line. */
  done(): void;
}

function bar(fraction: number | null, tick: number): string {
  if (fraction === null) {
    // Unknown total: a block that moves, so the user sees it is alive.
    const at = tick % BAR_WIDTH;
    return `[${' '.repeat(at)}###${' '.repeat(Math.max(0, BAR_WIDTH - at - 3))}]`.slice(0, BAR_WIDTH + 2);
  }
  const filled = Math.round(Math.min(1, Math.max(0, fraction)) * BAR_WIDTH);
  return `[${'#'.repeat(filled)}${'-'.repeat(BAR_WIDTH - filled)}] ${String(Math.floor(Math.min(1, fraction) * 100)).padStart(3)}%`;
}

/**
 * A progress bar redrawn in place on a terminal; plain lines at milestones otherwise (a
 * log, a CI job), so that nothing fills a file with carriage returns.
 */
export function createProgress(out: TextOutput, label: string, now: () => number = Date.now): Progress {
  if (out.isTTY === true) {
    let last = -Infinity;
    let tick = 0;
    let pending: string | null = null;
    const draw = (line: string) => {
      out.write(`\r\x1b[K${line}`);
      pending = null;
    };
    return {
      report(fraction, text, milestone = false) {
        tick += 1;
        const line = `${label} ${bar(fraction, tick)} ${text}`;
        if (milestone || now() - last >= REDRAW_INTERVAL_MS) {
          last = now();
          draw(line);
        } else {
          pending = line;
        }
      },
      done() {
        if (pending !== null) draw(pending);
        out.write('\n');
      },
    };
  }
  return {
    report(_fraction, text, milestone = false) {
      if (milestone) out.write(`${label}: ${text}\n`);
    },
    done() {},
  };
}
