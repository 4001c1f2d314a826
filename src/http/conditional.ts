/**
 * If-None-Match (RFC 9110, section 13.1.2), for the answers that carry an ETag (the
 * branding, the snippet). A cache revalidates with the tag it holds, which a CDN or a
 * proxy that compresses may have made weak (`W/"..."`), and a client may list several
 * tags, or send `*` ("any current representation"). The comparison is the weak one, as
 * the RFC requires for If-None-Match: two tags match when their opaque parts are equal,
 * with or without `W/` on either side. A field that does not parse matches nothing.
 */

/** The opaque part of an entity tag (with its quotes), without `W/`. */
function opaqueTag(tag: string): string {
  return tag.startsWith('W/') ? tag.slice(2) : tag;
}

/** True when `field` (the request's If-None-Match, repeated fields joined) names `etag`, or is `*`: answer 304. */
export function ifNoneMatchHits(field: string | readonly string[] | undefined, etag: string): boolean {
  if (field === undefined) return false;
  const value = typeof field === 'string' ? field : field.join(',');
  if (value.trim() === '*') return true;
  const wanted = opaqueTag(etag);
  let i = 0;
  while (i < value.length) {
    const c = value[i];
    if (c === ' ' || c === '\t' || c === ',') {
      i += 1;
      continue;
    }
    const open = value.startsWith('W/', i) ? i + 2 : i;
    if (value[open] !== '"') return false;
    // An opaque tag holds no `"` (RFC 9110 etagc), so the next one closes it; it may hold a comma.
    const close = value.indexOf('"', open + 1);
    if (close < 0) return false;
    if (value.slice(open, close + 1) === wanted) return true;
    i = close + 1;
  }
  return false;
}
