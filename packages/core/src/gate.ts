/**
 * A gate in a page (the snippet's, `@dunwall/react`'s): while it is up, everything else is
 * inert (no focus, no clicks), what the page adds meanwhile too (a chat widget's frame), and
 * the page does not scroll. The dialog takes the focus itself (a screen reader reads it, and
 * no ring shows until the keyboard moves); Tab and Shift+Tab cycle its links, Escape does
 * nothing, and a focus or a click outside returns to it.
 */

export interface GateParts {
  /** What holds the gate in the page (the rest of the page goes inert). */
  own: HTMLElement;
  /** The backdrop: a click on it would otherwise leave the focus on the page's body. */
  veil: HTMLElement;
  dialog: HTMLElement;
  /** The focused element where the gate's links live (a shadow root's, or the document's). */
  active: () => Element | null;
}

/** Holds the page under the gate; returns the release, which gives the page back. */
export function holdPage({ own, veil, dialog, active }: GateParts): () => void {
  const made: HTMLElement[] = [];
  const makeInert = (n: Node) => {
    if (n !== own && n instanceof HTMLElement && !n.inert) {
      n.inert = true;
      made.push(n);
    }
  };
  const { body, documentElement: html } = document;
  for (const n of Array.from(body.children)) makeInert(n);
  const arrivals = new MutationObserver((records) => records.forEach((r) => r.addedNodes.forEach(makeInert)));
  arrivals.observe(body, { childList: true });
  const saved = [html.style.overflow, body.style.overflow];
  html.style.overflow = body.style.overflow = 'hidden';

  const focusDialog = () => dialog.focus();
  const onKey = (e: KeyboardEvent) => {
    if (e.key === 'Escape') {
      e.preventDefault();
      e.stopPropagation();
      return;
    }
    if (e.key !== 'Tab') return;
    e.preventDefault();
    const items = Array.from(dialog.querySelectorAll<HTMLElement>('a[href],button'));
    if (items.length === 0) return focusDialog();
    const at = items.findIndex((i) => i === active());
    items[e.shiftKey ? (at <= 0 ? items.length - 1 : at - 1) : (at + 1) % items.length]?.focus();
  };
  const listening = new AbortController();
  const { signal } = listening;
  document.addEventListener('keydown', onKey, { capture: true, signal });
  document.addEventListener('focusin', (e) => own.contains(e.target as Node) || focusDialog(), {
    capture: true,
    signal,
  });
  veil.addEventListener(
    'mousedown',
    (e) => {
      if (e.target !== veil) return;
      e.preventDefault();
      focusDialog();
    },
    { signal },
  );
  focusDialog();
  return () => {
    listening.abort();
    arrivals.disconnect();
    for (const n of made) n.inert = false;
    html.style.overflow = saved[0] ?? '';
    body.style.overflow = saved[1] ?? '';
  };
}
