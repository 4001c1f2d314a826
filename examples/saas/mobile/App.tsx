import { BillingBanner, BillingGate, DunwallProvider, useBillingStatus } from '@dunwall/react-native';
import { SafeAreaView, StyleSheet, Text, View } from 'react-native';

// Your Dunwall service and your tenant (Expo inlines EXPO_PUBLIC_ variables; so does this
// app's vite.config.ts for the web).
const DUNWALL_URL = process.env.EXPO_PUBLIC_DUNWALL_URL ?? 'https://dunwall.example.com';
const DUNWALL_TENANT = process.env.EXPO_PUBLIC_DUNWALL_TENANT ?? 'acme';
const PUBLISHABLE_KEY = process.env.EXPO_PUBLIC_DUNWALL_KEY ?? 'pk_live_...';

interface Props {
  /** The signed-in account's Stripe customer id (`cus_...`); null before sign-in. */
  customer: string | null;
  /** HMAC-SHA256 of that id, from your backend: gives the "Pay now" link. */
  hmac?: string | null;
}

/** The signed-in part of the app, under the provider: the banner on top, the gate over all. */
export default function App({ customer, hmac }: Props) {
  return (
    <DunwallProvider
      baseUrl={DUNWALL_URL}
      tenant={DUNWALL_TENANT}
      publishableKey={PUBLISHABLE_KEY}
      customer={customer}
      hmac={hmac}
    >
      <SafeAreaView style={styles.screen}>
        <BillingBanner />
        <Projects />
      </SafeAreaView>
      <BillingGate supportUrl="mailto:support@acme.example.com" />
    </DunwallProvider>
  );
}

function Projects() {
  const { status } = useBillingStatus();
  return (
    <View style={styles.body}>
      <Text style={styles.title}>Projects</Text>
      <Text>{status === 'active' ? 'Everything is paid up.' : 'Your plan needs attention.'}</Text>
    </View>
  );
}

const styles = StyleSheet.create({
  screen: { flex: 1, backgroundColor: '#ffffff' },
  body: { padding: 16 },
  title: { fontSize: 24, fontWeight: '700', marginBottom: 8 },
});
