import { defineConfig, loadEnv } from 'vite';

export default defineConfig(({ mode }) => {
  // VITE_DUNWALL_URL, VITE_DUNWALL_TENANT and VITE_DUNWALL_KEY, from the environment or .env.
  const env = loadEnv(mode, process.cwd(), 'VITE_');
  return {
    // The React Native screen on the web: react-native is react-native-web.
    resolve: { alias: { 'react-native': 'react-native-web' } },
    // What Expo inlines for the React Native screen: the same values as the web page's.
    define: {
      'process.env.EXPO_PUBLIC_DUNWALL_URL': JSON.stringify(env.VITE_DUNWALL_URL),
      'process.env.EXPO_PUBLIC_DUNWALL_TENANT': JSON.stringify(env.VITE_DUNWALL_TENANT),
      'process.env.EXPO_PUBLIC_DUNWALL_KEY': JSON.stringify(env.VITE_DUNWALL_KEY),
    },
    build: {
      target: 'es2022',
      rolldownOptions: { input: { main: 'index.html', mobile: 'mobile.html' } },
    },
  };
});
