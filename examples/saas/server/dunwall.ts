import { createDunwall } from '@dunwall/node';

// One copy per process, made when the server starts: it lists your tenant's non-active
// subscribers, then follows Dunwall's status feed. status() answers from memory.
export const dunwall = createDunwall({
  baseUrl: process.env.DUNWALL_URL ?? 'https://dunwall.example.com',
  // A secret key with the status:read scope, from your secret store; never sent to a browser.
  secretKey: process.env.DUNWALL_SECRET_KEY ?? '',
  // The tenant's HMAC secret, from your secret store: dunwall.identity() signs the customer id with it.
  hmacSecret: process.env.DUNWALL_HMAC_SECRET,
});
