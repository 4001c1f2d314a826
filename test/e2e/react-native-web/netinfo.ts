/**
 * The app's NetInfo, in the page: `@react-native-community/netinfo`'s `addEventListener`
 * (the current state at once, then every change), following the browser's online and
 * offline events as NetInfo does on the web.
 */
type State = { type: string; isConnected: boolean | null; isInternetReachable: boolean | null; details: null };
const state = (): State => ({
  type: navigator.onLine ? 'wifi' : 'none',
  isConnected: navigator.onLine,
  isInternetReachable: navigator.onLine,
  details: null,
});

const NetInfo = {
  addEventListener(listener: (state: State) => void): () => void {
    const changed = () => listener(state());
    window.addEventListener('online', changed);
    window.addEventListener('offline', changed);
    changed();
    return () => {
      window.removeEventListener('online', changed);
      window.removeEventListener('offline', changed);
    };
  },
  fetch: async (): Promise<State> => state(),
};
export default NetInfo;
