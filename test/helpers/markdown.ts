/**
 * Just enough Markdown for the docs tests: headings, their anchors, and the tables of a
 * section, read as GitHub renders them.
 */

/** GitHub's anchor of a heading: lowercase, punctuation dropped, spaces to hyphens. */
export function anchorOf(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[`*_]/g, '')
    .replace(/[^\p{L}\p{N} -]/gu, '')
    .replace(/ /g, '-');
}

/** The anchors of every heading of a page. */
export function anchorsOf(text: string): Set<string> {
  return new Set([...text.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchorOf(m[1] ?? '')));
}

/** The page's sections of one heading level, by heading: each runs to the next heading of that level or above. */
export function sectionsOf(text: string, level = 2): Map<string, string> {
  const out = new Map<string, string>();
  let heading: string | null = null;
  let lines: string[] = [];
  const stop = new RegExp(`^#{1,${level}} `);
  const start = new RegExp(`^#{${level}} (.+)$`);
  for (const line of text.split('\n')) {
    if (stop.test(line)) {
      if (heading !== null) out.set(heading, lines.join('\n'));
      const m = start.exec(line);
      heading = m ? (m[1] ?? '').trim() : null;
      lines = [];
    } else {
      lines.push(line);
    }
  }
  if (heading !== null) out.set(heading, lines.join('\n'));
  return out;
}

/** The tables of a text, each as its body rows (header and separator left out), each row as its cells. */
export function tablesOf(text: string): string[][][] {
  const tables: string[][][] = [];
  let rows: string[] | null = null;
  const flush = () => {
    if (rows !== null && rows.length > 2) tables.push(rows.slice(2).map(cellsOf));
    rows = null;
  };
  for (const line of text.split('\n')) {
    if (line.startsWith('|')) (rows ??= []).push(line);
    else flush();
  }
  flush();
  return tables;
}

function cellsOf(row: string): string[] {
  return row
    .replace(/^\|/, '')
    .replace(/\|$/, '')
    .split('|')
    .map((cell) => cell.trim());
}

/** The `code` spans of a text, in order. */
export function codesOf(text: string): string[] {
  return [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? '');
}
