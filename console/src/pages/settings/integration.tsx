/** @jsxImportSource preact */
import { useEffect, useRef, useState } from 'preact/hooks';
import { api } from '../../api.js';
import type { ApiError } from '../../api.js';
import type {
  Settings,
  SettingsPatch,
  StripeApiKeyBody,
  StripeApiKeyState,
  StripeWebhookSecretBody,
} from '@dunwall/wire';
import { ErrorNote, keepValue, useAction, useConsole } from '../../ui.js';

/**
 * The settings of the tenant object that tie Dunwall to the tenant's app and to Stripe (the
 * signing secret is write-only: only whether one is set is ever answered).
 */
export type Integration = Pick<
  Settings,
  'card_update_url' | 'hmac_required' | 'allowed_origins' | 'stripe_webhook_secret_set' | 'stripe_api_key'
>;

type Field = keyof Pick<
  SettingsPatch,
  'card_update_url' | 'hmac_required' | 'allowed_origins' | 'stripe_webhook_secret'
>;
const FIELDS: readonly Field[] = ['card_update_url', 'hmac_required', 'allowed_origins', 'stripe_webhook_secret'];

/**
 * The field a refusal names: the service's validation details start with it
 * (`card_update_url: must be an https URL`, `allowed_origins[1]: must be an origin ...`,
 * `secret: ...` for the signing secret's own route).
 * Null: the refusal is not about one field, and the form shows it as a whole.
 */
export function fieldOf(error: ApiError | null): Field | null {
  if (error === null || error.code !== 'invalid_request') return null;
  const name = /^([a-z_]+)(?:\[\d+\])?:/.exec(error.detail)?.[1];
  // The signing secret is set by its own route, whose body names it `secret`.
  return FIELDS.find((f) => f === (name === 'secret' ? 'stripe_webhook_secret' : name)) ?? null;
}

/** The line of the origins' box a refusal names (`allowed_origins[1]` is the second), if it names one. */
function lineOf(error: ApiError): number | null {
  const m = /^allowed_origins\[(\d+)\]:/.exec(error.detail);
  return m ? Number(m[1]) + 1 : null;
}

/** The refusal of one field, where the field is: its id describes the field (aria-describedby). */
function FieldError(props: { id: string; error: ApiError | null; field: Field }) {
  const mine = fieldOf(props.error) === props.field ? props.error : null;
  if (mine === null) return null;
  const line = props.field === 'allowed_origins' ? lineOf(mine) : null;
  return (
    <p id={props.id} class="field-error" role="alert">
      {line !== null ? `Line ${line}: ` : ''}
      {mine.detail} <code class="code">{mine.code}</code>
    </p>
  );
}

const originsText = (origins: string[] | null) => (origins ?? []).join('\n');
/** The box's origins, one a line, blank lines skipped; none is null (any origin). */
const originsOf = (text: string): string[] | null => {
  const list = text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');
  return list.length === 0 ? null : list;
};

/** The card update page, the hmac requirement and the allowed origins: saved together, only what changed. */
function AppSettings(props: { saved: Integration; onSaved: (s: Integration) => void }) {
  const { base } = useConsole();
  const [url, setUrl] = useState(props.saved.card_update_url ?? '');
  const [hmac, setHmac] = useState(props.saved.hmac_required);
  const [origins, setOrigins] = useState(originsText(props.saved.allowed_origins));
  const { error, busy, run } = useAction();
  const form = useRef<HTMLFormElement>(null);
  // What the service answered replaces the draft: after a save, or another page's.
  const savedOrigins = originsText(props.saved.allowed_origins);
  useEffect(() => {
    setUrl(props.saved.card_update_url ?? '');
    setHmac(props.saved.hmac_required);
    setOrigins(savedOrigins);
  }, [props.saved.card_update_url, props.saved.hmac_required, savedOrigins]);

  const patch: SettingsPatch = {};
  const wantedUrl = url.trim() === '' ? null : url.trim();
  if (wantedUrl !== props.saved.card_update_url) patch.card_update_url = wantedUrl;
  if (hmac !== props.saved.hmac_required) patch.hmac_required = hmac;
  const wantedOrigins = originsOf(origins);
  if (JSON.stringify(wantedOrigins) !== JSON.stringify(props.saved.allowed_origins))
    patch.allowed_origins = wantedOrigins;
  const changed = Object.keys(patch).length > 0;

  const save = async (e: Event) => {
    e.preventDefault();
    if (!changed) return;
    await run(
      async () => {
        const settings = await api.patch<Settings>(`${base}/settings`, patch);
        props.onSaved(settings);
        return 'Integration settings saved.';
      },
      (failure) => {
        // The keyboard goes where the refusal is.
        const field = fieldOf(failure);
        if (field !== null) form.current?.querySelector<HTMLElement>(`[name="${field}"]`)?.focus();
      },
    );
  };
  const at = fieldOf(error);
  /** A field's name, and its ties to its hint and, when it is the one refused, to the refusal. */
  const fieldProps = (field: Field) => ({
    name: field,
    'aria-invalid': at === field ? ('true' as const) : undefined,
    'aria-describedby': at === field ? `${field}-hint ${field}-error` : `${field}-hint`,
  });

  return (
    <form class="form" onSubmit={save} ref={form} aria-labelledby="app-settings-title" noValidate>
      <h3 id="app-settings-title">Your app</h3>
      <div class="field">
        <label for="card_update_url">
          <span>Card update URL</span>
        </label>
        <input
          id="card_update_url"
          {...fieldProps('card_update_url')}
          type="url"
          inputMode="url"
          autocomplete="off"
          spellcheck={false}
          placeholder="https://app.example.com/billing"
          value={url}
          onInput={keepValue(setUrl)}
        />
        <p id="card_update_url-hint" class="hint">
          Your page where a customer changes their card (https): the banner and the gate link to it, after Pay now when
          an invoice is open. Empty: none (the branding's payment link stands in).
        </p>
        <FieldError id="card_update_url-error" error={error} field="card_update_url" />
      </div>
      <div class="field">
        <label class="check">
          <input
            type="checkbox"
            {...fieldProps('hmac_required')}
            checked={hmac}
            onChange={(e) => setHmac((e.target as HTMLInputElement).checked)}
          />
          <span>Require the hmac on every lookup</span>
        </label>
        <p id="hmac_required-hint" class="hint">
          On: a lookup without the customer's hmac, signed by your server, is refused (403 hmac_required), so no page
          can ask about another customer.
        </p>
        <FieldError id="hmac_required-error" error={error} field="hmac_required" />
      </div>
      <div class="field">
        <label for="allowed_origins">
          <span>Allowed origins</span>
        </label>
        <textarea
          id="allowed_origins"
          {...fieldProps('allowed_origins')}
          rows={3}
          spellcheck={false}
          autocomplete="off"
          placeholder="https://app.example.com"
          value={origins}
          onInput={keepValue(setOrigins)}
        />
        <p id="allowed_origins-hint" class="hint">
          The pages allowed to call the lookup from a browser, one origin a line (scheme://host[:port], as the browser
          sends it). Empty: any origin.
        </p>
        <FieldError id="allowed_origins-error" error={error} field="allowed_origins" />
      </div>
      {at === null ? <ErrorNote error={error} /> : null}
      <button type="submit" class="button" disabled={busy || !changed}>
        {busy ? 'Saving…' : 'Save integration settings'}
      </button>
    </form>
  );
}

/**
 * Stripe's signing secret: written, never shown back; a new one replaces the old with an
 * overlap. It decides statuses as an override does, so it needs `stripe:write`
 * (`PUT .../settings/stripe-webhook-secret`), which `settings:write` does not reach.
 */
function StripeSecret(props: { set: boolean | null; canWrite: boolean; onSaved: () => void }) {
  const { base } = useConsole();
  const [secret, setSecret] = useState('');
  const { error, busy, run } = useAction();
  const input = useRef<HTMLInputElement>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    await run(
      async () => {
        await api.put(`${base}/settings/stripe-webhook-secret`, {
          secret: secret.trim(),
        } satisfies StripeWebhookSecretBody);
        // Not kept by the page once the service has it.
        setSecret('');
        props.onSaved();
        return props.set ? 'Stripe signing secret replaced.' : 'Stripe signing secret set.';
      },
      () => input.current?.focus(),
    );
  };
  const at = fieldOf(error);
  const hints = [
    'stripe_webhook_secret-state',
    props.canWrite ? 'stripe_webhook_secret-hint' : 'stripe_webhook_secret-scope',
  ];
  if (at === 'stripe_webhook_secret') hints.push('stripe_webhook_secret-error');
  return (
    <form class="form" onSubmit={save} aria-labelledby="stripe-secret-title" noValidate>
      <h3 id="stripe-secret-title">Stripe</h3>
      <p id="stripe_webhook_secret-state" class={props.set === false ? 'note warn-note' : 'note'} role="status">
        {props.set === null
          ? 'Whether a signing secret is set is shown to a key with the settings:write scope.'
          : props.set
            ? 'A signing secret is set: Stripe’s deliveries are verified with it.'
            : 'No signing secret is set: Stripe’s deliveries are refused (400 invalid_signature) until one is.'}
      </p>
      <div class="field">
        <label for="stripe_webhook_secret">
          <span>{props.set ? 'New Stripe signing secret' : 'Stripe signing secret'}</span>
        </label>
        <input
          id="stripe_webhook_secret"
          name="stripe_webhook_secret"
          ref={input}
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="whsec_…"
          disabled={!props.canWrite}
          value={secret}
          aria-invalid={at === 'stripe_webhook_secret' ? 'true' : undefined}
          aria-describedby={hints.join(' ')}
          onInput={keepValue(setSecret)}
        />
        {props.canWrite ? (
          <p id="stripe_webhook_secret-hint" class="hint">
            The signing secret of your Stripe endpoint (whsec_…), from Stripe’s dashboard. It is never shown again, here
            or by the API. A new one replaces the old; both verify for the overlap, so no delivery is refused while
            Stripe switches.
          </p>
        ) : (
          <p id="stripe_webhook_secret-scope" class="hint">
            Setting the Stripe signing secret needs the <code>stripe:write</code> scope, which the key this session was
            opened with does not hold. The secret decides who is locked out, as an override does, so{' '}
            <code>settings:write</code> does not reach it.
          </p>
        )}
        <FieldError id="stripe_webhook_secret-error" error={error} field="stripe_webhook_secret" />
      </div>
      {at === null ? <ErrorNote error={error} /> : null}
      {props.canWrite ? (
        <button type="submit" class="button" disabled={busy || secret.trim() === ''}>
          {busy ? 'Saving…' : props.set ? 'Replace signing secret' : 'Set signing secret'}
        </button>
      ) : null}
    </form>
  );
}

/** A date as the person reading it writes dates. */
const dateOf = (iso: string) => new Date(iso).toLocaleString();

/**
 * The Stripe API key (docs/links.md): written, never shown back but by its prefix and date.
 * Stripe checks it before it is kept, and a refusal names what is missing (a permission, the
 * portal's settings). It reaches the tenant's Stripe account, so it needs `stripe:write`.
 */
function StripeApiKey(props: {
  saved: StripeApiKeyState['stripe_api_key'] | undefined;
  canWrite: boolean;
  onSaved: (key: StripeApiKeyState['stripe_api_key']) => void;
}) {
  const { base, session } = useConsole();
  const path = session.kind === 'tenant' ? `${base}/settings/stripe-api-key` : `${base}/stripe-api-key`;
  const [key, setKey] = useState('');
  const { error, busy, run } = useAction();
  const input = useRef<HTMLInputElement>(null);
  const save = async (e: Event) => {
    e.preventDefault();
    await run(
      async () => {
        const state = await api.put<StripeApiKeyState>(path, { key: key.trim() } satisfies StripeApiKeyBody);
        // Not kept by the page once the service has it.
        setKey('');
        props.onSaved(state.stripe_api_key);
        return 'Stripe API key checked with Stripe and saved.';
      },
      () => input.current?.focus(),
    );
  };
  const remove = async () => {
    await run(async () => {
      const state = await api.del<StripeApiKeyState>(path);
      props.onSaved(state.stripe_api_key);
      return 'Stripe API key removed.';
    });
  };
  const saved = props.saved;
  return (
    <form class="form" onSubmit={save} aria-labelledby="stripe-api-key-title" noValidate>
      <h3 id="stripe-api-key-title">Stripe API key</h3>
      <p id="stripe_api_key-state" class="note" role="status">
        {saved === undefined
          ? 'Which key is set is shown to a key with the settings:write scope.'
          : saved === null
            ? 'No Stripe API key: pay and card links are the pages Stripe’s events carried.'
            : `Key ${saved.prefix}… set ${dateOf(saved.set_at)}.`}
      </p>
      <div class="field">
        <label for="stripe_api_key">
          <span>{saved ? 'New Stripe API key' : 'Stripe API key'}</span>
        </label>
        <input
          id="stripe_api_key"
          name="stripe_api_key"
          ref={input}
          type="password"
          autocomplete="off"
          spellcheck={false}
          placeholder="rk_live_…"
          disabled={!props.canWrite}
          value={key}
          aria-describedby={`stripe_api_key-state ${props.canWrite ? 'stripe_api_key-hint' : 'stripe_api_key-scope'}`}
          onInput={keepValue(setKey)}
        />
        {props.canWrite ? (
          <p id="stripe_api_key-hint" class="hint">
            A restricted key (rk_…) with read on Invoices, Customers and Subscriptions and write on Customer portal.
            Stripe is asked to prove these before the key is kept; it is never shown again, only its first characters.
          </p>
        ) : (
          <p id="stripe_api_key-scope" class="hint">
            Setting the Stripe API key needs the <code>stripe:write</code> scope, which the key this session was opened
            with does not hold.
          </p>
        )}
      </div>
      <ErrorNote error={error} />
      {props.canWrite ? (
        <div class="actions-row">
          <button type="submit" class="button" disabled={busy || key.trim() === ''}>
            {busy ? 'Checking with Stripe…' : saved ? 'Replace Stripe API key' : 'Set Stripe API key'}
          </button>
          {saved ? (
            <button type="button" class="button secondary" disabled={busy} onClick={() => void remove()}>
              Remove
            </button>
          ) : null}
        </div>
      ) : null}
    </form>
  );
}

/**
 * The tenant object's settings besides branding and policy: the card update page, the hmac
 * requirement, the allowed origins and Stripe's signing secret, each refused as the API
 * refuses it, the refusal shown at its field. `saved` null: the session may not read them
 * (no settings:write). The secret's field needs `stripe:write` (`canSetStripe`), and says
 * why it is disabled without it.
 */
export function IntegrationSection(props: {
  saved: Integration | null;
  canSetStripe: boolean;
  onSaved: (s: Integration) => void;
}) {
  const { saved, onSaved } = props;
  return (
    <section class="card settings-section" aria-labelledby="integration-title">
      <h2 id="integration-title">Integration</h2>
      {saved !== null ? <AppSettings saved={saved} onSaved={onSaved} /> : null}
      <StripeSecret
        set={saved?.stripe_webhook_secret_set ?? null}
        canWrite={props.canSetStripe}
        onSaved={() => (saved !== null ? onSaved({ ...saved, stripe_webhook_secret_set: true }) : undefined)}
      />
      <StripeApiKey
        saved={saved === null ? undefined : saved.stripe_api_key}
        canWrite={props.canSetStripe}
        onSaved={(key) => (saved !== null ? onSaved({ ...saved, stripe_api_key: key }) : undefined)}
      />
    </section>
  );
}
