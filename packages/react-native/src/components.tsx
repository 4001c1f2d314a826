/**
 * `<BillingBanner/>` and `<BillingGate/>` from React Native's own primitives: the banner a
 * `View` announced as an alert, the gate a full-screen `Modal` that Android's back button
 * does not close (`onRequestClose` does nothing) and that VoiceOver keeps to itself
 * (`accessibilityViewIsModal`). The tenant's branding (texts in the device's language,
 * colours, logo, links), the countdown to `lockout_at`, "Pay now" to the invoice's page
 * first (opened by `Linking`: coming back to the app asks again), a banner dismissed for the
 * app's session (in memory, per tenant and customer). Styled by `style` and per-part `styles`;
 * a function child draws the tenant's own UI from the same facts. What is shown and the view
 * are `@dunwall/core`'s: these components only render them.
 */
import { useMemo, useSyncExternalStore } from 'react';
import type { ReactNode } from 'react';
import { Image, Linking, Modal, Pressable, SafeAreaView, Text, View } from 'react-native';
import type { ImageStyle, Insets, StyleProp, TextStyle, ViewStyle } from 'react-native';
import { dismissKey, gateLinks, memoryDismissals, shownFor, viewOf } from '@dunwall/core';
import type {
  BannerOptions,
  BillingState,
  BillingView as SharedView,
  Branding,
  Colors,
  GateOptions,
  Link,
  ViewOptions,
} from '@dunwall/core';
import { useBillingStatus, useBranding, useDunwallContext } from '../../react/src/provider.js';
import { deviceLanguages, httpsUrl } from './native-view.js';

/** A style for each part, after the defaults. */
export interface BillingStyles {
  /** The gate's screen, behind its box. */
  screen?: StyleProp<ViewStyle>;
  logo?: StyleProp<ImageStyle>;
  title?: StyleProp<TextStyle>;
  /** The message. */
  text?: StyleProp<TextStyle>;
  countdown?: StyleProp<TextStyle>;
  /** The row of links. */
  actions?: StyleProp<ViewStyle>;
  /** The first link (the way to pay) and its label. */
  primary?: StyleProp<ViewStyle>;
  primaryText?: StyleProp<TextStyle>;
  /** Every other link and its label. */
  link?: StyleProp<ViewStyle>;
  linkText?: StyleProp<TextStyle>;
  dismiss?: StyleProp<ViewStyle>;
  dismissText?: StyleProp<TextStyle>;
  watermark?: StyleProp<TextStyle>;
}

export interface BillingViewProps extends ViewOptions {
  /** The reader's language(s); default: the device's (`Intl`). */
  languages?: string | readonly string[];
  /** The banner's, or the gate's box's, style, after the defaults. */
  style?: StyleProp<ViewStyle>;
  styles?: BillingStyles;
  /**
   * The safe area's insets, e.g. `useSafeAreaInsets()` of react-native-safe-area-context,
   * added to the paddings. Without them a `SafeAreaView` keeps clear of the notch (iOS).
   */
  insets?: Insets;
}

/** What a tenant's own banner or gate is drawn from. */
export interface BillingView extends SharedView<BillingState> {
  /** Opens a link with `Linking.openURL`. */
  open(href: string): void;
}

/** `dismissible`: the × hides the banner for the app's session. */
export interface BillingBannerProps extends BillingViewProps, BannerOptions {
  children?: (view: BillingView & { dismiss(): void }) => ReactNode;
}

export interface BillingGateProps extends BillingViewProps, GateOptions {
  children?: (view: BillingView) => ReactNode;
}

const MINUTE_MS = 60_000;
const NO_BRANDING: Branding = {};
const WHITE = '#ffffff';
const ORIENTATIONS: ('portrait' | 'portrait-upside-down' | 'landscape')[] = [
  'portrait',
  'portrait-upside-down',
  'landscape',
];

const open = (href: string) => void Linking.openURL(href).catch(() => {});
/** Android's back button, iOS's sheet gesture: the gate stays until the service says otherwise. */
const stay = () => {};

/** The minute, while a countdown is shown. */
function useMinute(on: boolean): number {
  const minute = () => Math.floor(Date.now() / MINUTE_MS);
  return useSyncExternalStore(
    (changed) => {
      if (!on) return () => {};
      const timer = setInterval(changed, MINUTE_MS / 4);
      return () => clearInterval(timer);
    },
    minute,
    // Rendered on a server too (React Native for the web, statically rendered).
    minute,
  );
}

function useView(show: boolean, props: BillingViewProps & GateOptions): [BillingView, Colors] {
  const { role } = useDunwallContext();
  const state = useBillingStatus();
  const branding = useBranding(show) ?? NO_BRANDING;
  const own = props.languages;
  const joined = own === undefined ? '' : typeof own === 'string' ? own : own.join(',');
  const languages = useMemo(() => (joined ? joined.split(',') : deviceLanguages()), [joined]);
  const minute = useMinute(show && state.lockoutAt !== null);
  const { view, colors } = viewOf({
    state,
    branding,
    languages,
    own: props,
    now: minute * MINUTE_MS,
    safe: httpsUrl,
    role,
  });
  return [{ ...view, open }, colors];
}

const pad = (base: number, insets: Insets | undefined): ViewStyle => ({
  paddingTop: base + (insets?.top ?? 0),
  paddingBottom: base + (insets?.bottom ?? 0),
  paddingLeft: base + (insets?.left ?? 0),
  paddingRight: base + (insets?.right ?? 0),
});

function Links({ links, colors, styles = {} }: { links: Link[]; colors: Colors; styles: BillingStyles | undefined }) {
  return links.map((l, i) => (
    <Pressable
      key={i}
      accessibilityRole="link"
      accessibilityLabel={l.text}
      onPress={() => open(l.href)}
      style={({ pressed }) => [
        { minHeight: 44, justifyContent: 'center', marginTop: 8, marginRight: 16 },
        i ? styles.link : [{ paddingHorizontal: 16, borderRadius: 8, backgroundColor: colors.accent }, styles.primary],
        pressed && { opacity: 0.7 },
      ]}
    >
      <Text
        style={[
          { fontSize: 16, fontWeight: '600', color: i ? colors.accent : WHITE },
          i ? styles.linkText : styles.primaryText,
        ]}
      >
        {l.text}
      </Text>
    </Pressable>
  ));
}

function Watermark({ style }: { style: StyleProp<TextStyle> }) {
  return <Text style={[{ fontSize: 12, marginTop: 8, opacity: 0.7 }, style]}>Powered by Dunwall</Text>;
}

// Dismissal: per tenant and customer, for the app's session (memory: a new launch shows it again).
const dismissals = memoryDismissals();

/**
 * The warning banner, or an active answer's notice (a soft banner, announced politely), where
 * it is placed (at the top of a screen); nothing for any other status.
 */
export function BillingBanner(props: BillingBannerProps) {
  const { tenant, customer } = useDunwallContext();
  const state = useBillingStatus();
  const key = customer ? dismissKey(tenant, customer, state.notice) : '';
  const dismissed = useSyncExternalStore(
    dismissals.subscribe,
    () => dismissals.has(key),
    () => false,
  );
  const shown = shownFor(state, dismissed);
  const show = shown === 'banner' || shown === 'notice';
  const [view, colors] = useView(show, props);
  if (!show) return null;
  const dismiss = () => key && dismissals.add(key);
  if (props.children)
    return (
      <View accessibilityRole="alert" testID="dunwall-banner" style={props.style}>
        {props.children({ ...view, dismiss })}
      </View>
    );
  const { styles = {}, insets } = props;
  const content = (
    <View style={[{ flexDirection: 'row', alignItems: 'flex-start' }, pad(10, insets)]}>
      <View style={{ flex: 1 }}>
        <Text style={[{ color: colors.text, fontSize: 15, lineHeight: 21 }, styles.text]}>
          {view.message}
          {view.countdown ? (
            <Text style={[{ fontWeight: '600' }, styles.countdown]}>{` ${view.countdown}`}</Text>
          ) : null}
        </Text>
        <View style={[{ flexDirection: 'row', flexWrap: 'wrap', alignItems: 'center' }, styles.actions]}>
          <Links links={view.links} colors={colors} styles={styles} />
          {view.watermark ? <Watermark style={[{ color: colors.text }, styles.watermark]} /> : null}
        </View>
      </View>
      {props.dismissible === false ? null : (
        <Pressable
          accessibilityRole="button"
          accessibilityLabel={view.texts.dismiss}
          hitSlop={8}
          onPress={dismiss}
          style={[{ width: 44, height: 44, alignItems: 'center', justifyContent: 'center' }, styles.dismiss]}
        >
          <Text style={[{ color: colors.text, fontSize: 24 }, styles.dismissText]}>×</Text>
        </Pressable>
      )}
    </View>
  );
  return (
    <View
      accessibilityRole={shown === 'notice' ? 'summary' : 'alert'}
      accessibilityLiveRegion="polite"
      testID={shown === 'notice' ? 'dunwall-notice' : 'dunwall-banner'}
      style={[
        { backgroundColor: colors.background, borderBottomWidth: 3, borderBottomColor: colors.accent },
        props.style,
      ]}
    >
      {insets ? content : <SafeAreaView>{content}</SafeAreaView>}
    </View>
  );
}

/** The full-screen gate for `lockout`, only ever from a fresh answer (the service's, or the app's API's 402); nothing otherwise. */
export function BillingGate(props: BillingGateProps) {
  const state = useBillingStatus();
  const show = shownFor(state, false) === 'gate';
  const [view, colors] = useView(show, props);
  if (!show) return null;
  const { styles = {} } = props;
  const links = gateLinks(view);
  return (
    <Modal
      visible
      transparent={false}
      animationType="fade"
      onRequestClose={stay}
      statusBarTranslucent
      supportedOrientations={ORIENTATIONS}
    >
      <SafeAreaView style={[{ flex: 1, backgroundColor: '#101828' }, styles.screen]}>
        <View style={[{ flex: 1, justifyContent: 'center', alignItems: 'center' }, pad(16, props.insets)]}>
          <View
            accessibilityViewIsModal
            testID="dunwall-gate"
            style={[
              props.children
                ? { width: '100%', maxWidth: 440 }
                : {
                    width: '100%',
                    maxWidth: 440,
                    padding: 28,
                    borderRadius: 12,
                    backgroundColor: WHITE,
                    borderTopWidth: 4,
                    borderTopColor: colors.accent,
                  },
              props.style,
            ]}
          >
            {props.children ? (
              props.children(view)
            ) : (
              <>
                {view.logo ? (
                  <Image
                    source={{ uri: view.logo }}
                    accessibilityIgnoresInvertColors
                    resizeMode="contain"
                    style={[{ height: 40, width: 160, marginBottom: 12 }, styles.logo]}
                  />
                ) : null}
                <Text
                  accessibilityRole="header"
                  style={[{ color: colors.text, fontSize: 22, fontWeight: '700', marginBottom: 8 }, styles.title]}
                >
                  {view.texts.lockoutTitle}
                </Text>
                <Text style={[{ color: colors.text, fontSize: 16, lineHeight: 23 }, styles.text]}>
                  {view.texts.lockout}
                </Text>
                <View
                  style={[
                    { flexDirection: 'row', flexWrap: 'wrap', alignItems: 'center', marginTop: 8 },
                    styles.actions,
                  ]}
                >
                  <Links links={links} colors={colors} styles={styles} />
                </View>
                {links.length || !view.texts.noLink ? null : (
                  <Text style={[{ color: colors.text, fontSize: 16, marginTop: 12 }, styles.text]}>
                    {view.texts.noLink}
                  </Text>
                )}
                {view.watermark ? <Watermark style={[{ color: colors.text }, styles.watermark]} /> : null}
              </>
            )}
          </View>
        </View>
      </SafeAreaView>
    </Modal>
  );
}
