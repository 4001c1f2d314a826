/**
 * The app's AsyncStorage, in the page: what `@react-native-async-storage/async-storage`
 * offers (string values behind promises), kept in a Map the test can read.
 */
const entries = new Map<string, string>();
(window as unknown as { asyncStorage: Map<string, string> }).asyncStorage = entries;

const AsyncStorage = {
  getItem: async (key: string): Promise<string | null> => entries.get(key) ?? null,
  setItem: async (key: string, value: string): Promise<void> => void entries.set(key, value),
  removeItem: async (key: string): Promise<void> => void entries.delete(key),
};
export default AsyncStorage;
