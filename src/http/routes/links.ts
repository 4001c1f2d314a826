import { createHash } from 'node:crypto';
import { Type } from 'typebox';
import type { Branding, BrandingTexts } from '../../domain/branding.js';
import type { LinkKind } from '../../domain/links.js';
import { openLink } from '../../services/customer-links.js';
import type { OpenLinkDeps } from '../../services/customer-links.js';
import type { App } from '../app-instance.js';
import { guardAddress } from '../rate-limit.js';
import type { RateLimiter } from '../rate-limit.js';
import { ProblemRef } from '../schemas.js';

/**
 * `GET /pay/:token` and `GET /card/:token` (docs/links.md): a customer's way out, opened from
 * the gate's Pay now or the banner's Update card. Answered 303 to Stripe's page, or to the
 * fallback, or with a small page saying whom to contact (410 for a token that names no valid
 * link). Never a 5xx, never cached, never a referrer (the token stays out of Stripe's logs),
 * rate limited per address like the lookup.
 */

/** The contact page's sentence in the languages it knows; English otherwise. */
const CONTACT_TEXT: Readonly<Record<string, { title: string; body: string; support: string }>> = {
  en: {
    title: 'This link cannot be opened',
    body: 'Please contact the support team of this service to pay or to update your card.',
    support: 'Contact support',
  },
  fr: {
    title: 'Ce lien ne peut pas être ouvert',
    body: "Veuillez contacter l'équipe d'assistance de ce service pour payer ou mettre à jour votre carte.",
    support: "Contacter l'assistance",
  },
  de: {
    title: 'Dieser Link kann nicht geöffnet werden',
    body: 'Bitte wenden Sie sich an den Support dieses Dienstes, um zu bezahlen oder Ihre Karte zu aktualisieren.',
    support: 'Support kontaktieren',
  },
  es: {
    title: 'No se puede abrir este enlace',
    body: 'Ponte en contacto con el equipo de soporte de este servicio para pagar o actualizar tu tarjeta.',
    support: 'Contactar con soporte',
  },
};

const STYLE =
  'body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;padding:0 1rem;line-height:1.5}a{font-weight:600}';
const STYLE_HASH = createHash('sha256').update(STYLE).digest('base64');
/** Nothing loads, nothing runs, nothing frames it: the page is text and one link. */
export const LINK_PAGE_CSP = `default-src 'none'; style-src 'sha256-${STYLE_HASH}'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The locale of the branding the reader asked for (Accept-Language, by weight): an exact tag,
 * else one of its language; `default` when none matches.
 */
export function pickLocale(header: string | undefined, locales: readonly string[]): string {
  if (header === undefined || locales.length === 0) return 'default';
  const asked = header
    .slice(0, 512)
    .split(',')
    .slice(0, 20)
    .map((part, i) => {
      const [tag = '', ...params] = part.trim().split(';');
      const q = params.map((p) => /^\s*q=([0-9.]+)\s*$/.exec(p)?.[1]).find((v) => v !== undefined);
      return { tag: tag.trim().toLowerCase(), q: q === undefined ? 1 : Number(q), i };
    })
    .filter((a) => a.tag !== '' && a.tag !== '*' && a.q > 0)
    .sort((a, b) => b.q - a.q || a.i - b.i);
  const byLower = new Map(locales.map((l) => [l.toLowerCase(), l]));
  for (const a of asked) {
    const exact = byLower.get(a.tag);
    if (exact !== undefined) return exact;
    const language = byLower.get(a.tag.split('-')[0] ?? '');
    if (language !== undefined) return language;
  }
  return 'default';
}

/** The reader's language among the page's own texts. */
function pageLanguage(header: string | undefined, chosen: string): string {
  const fromBranding = chosen.split('-')[0] ?? '';
  if (fromBranding in CONTACT_TEXT) return fromBranding;
  return pickLocale(header, Object.keys(CONTACT_TEXT)).replace('default', 'en');
}

/** The contact page, in the reader's language among the branding's locales. */
export function contactPage(
  branding: Branding | null,
  acceptLanguage: string | undefined,
): { html: string; lang: string } {
  const locales = Object.keys(branding?.texts ?? {}).filter((l) => l !== 'default');
  const chosen = pickLocale(acceptLanguage, locales);
  const own: BrandingTexts = {
    ...branding?.texts?.default,
    ...(chosen === 'default' ? {} : branding?.texts?.[chosen]),
  };
  const lang = pageLanguage(acceptLanguage, chosen);
  const text = CONTACT_TEXT[lang] ?? CONTACT_TEXT.en;
  const title = escapeHtml(text?.title ?? '');
  const body = escapeHtml(text?.body ?? '');
  const supportUrl = branding?.support_url;
  const support =
    supportUrl === undefined
      ? ''
      : `<p><a href="${escapeHtml(supportUrl)}" rel="noreferrer">${escapeHtml(own.support ?? text?.support ?? '')}</a></p>`;
  const htmlLang = chosen === 'default' ? lang : chosen;
  const html = `<!doctype html><html lang="${escapeHtml(htmlLang)}"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta name="referrer" content="no-referrer"><title>${title}</title><style>${STYLE}</style></head><body><h1>${title}</h1><p>${body}</p>${support}</body></html>`;
  return { html, lang: htmlLang };
}

export interface LinkRoutesOptions extends OpenLinkDeps {
  limiter: RateLimiter | null;
}

export async function linkRoutes(app: App, opts: LinkRoutesOptions): Promise<void> {
  const { limiter } = opts;
  for (const kind of ['pay', 'card'] as const satisfies readonly LinkKind[]) {
    app.get(
      `/${kind}/:token`,
      {
        ...(limiter ? { onRequest: guardAddress(limiter, 'ip') } : {}),
        schema: {
          operationId: kind === 'pay' ? 'openPayLink' : 'openCardLink',
          summary:
            kind === 'pay'
              ? "A customer's pay link: 303 to the invoice's current page at Stripe (or the fallback)"
              : "A customer's card link: 303 to a Customer Portal session on the card form (or the fallback)",
          tags: ['links'],
          security: [],
          params: Type.Object({ token: Type.String({ maxLength: 200 }) }),
          response: {
            200: Type.String({ description: 'The contact page (text/html): every way out failed' }),
            303: Type.Null({ description: 'To the page, in Location' }),
            410: Type.String({ description: 'The contact page (text/html): the token names no valid link' }),
            429: ProblemRef,
          },
        },
        // Any token is answered (a malformed one with the 410 page), never a validation error.
        validatorCompiler: () => () => true,
      },
      async (req, reply) => {
        const token = String((req.params as { token?: unknown }).token ?? '');
        const acceptLanguage = req.headers['accept-language'];
        const answer = await openLink(opts, kind, token, acceptLanguage);
        reply
          .header('cache-control', 'no-store')
          .header('referrer-policy', 'no-referrer')
          .header('x-content-type-options', 'nosniff');
        if (answer.kind === 'redirect') return reply.code(303).header('location', answer.location).send(null);
        const page = contactPage(answer.branding, acceptLanguage);
        return reply
          .code(answer.status)
          .header('content-type', 'text/html; charset=utf-8')
          .header('content-language', page.lang)
          .header('content-security-policy', LINK_PAGE_CSP)
          .header('x-frame-options', 'DENY')
          .send(Buffer.from(page.html) as never);
      },
    );
  }
}
