/**
 * Declarations for the libraries of a React Native app that docs/examples/react-native/App.tsx
 * and the tests' fixtures import, none of which the repository installs (the tests alias them
 * to react-native-web and to small fakes). Their shapes are the ones the libraries publish,
 * trimmed to what is used; `react-native` itself is declared by packages/react-native/types.
 */
declare module 'react-native-web' {
  export * from 'react-native';
}

declare module '@react-native-async-storage/async-storage' {
  export interface AsyncStorageStatic {
    getItem(key: string): Promise<string | null>;
    setItem(key: string, value: string): Promise<void>;
    removeItem(key: string): Promise<void>;
  }
  const AsyncStorage: AsyncStorageStatic;
  export default AsyncStorage;
}

declare module '@react-native-community/netinfo' {
  export interface NetInfoState {
    type: string;
    isConnected: boolean | null;
    isInternetReachable: boolean | null;
    details: unknown;
  }
  export type NetInfoChangeHandler = (state: NetInfoState) => void;
  export type NetInfoSubscription = () => void;
  const NetInfo: {
    addEventListener(listener: NetInfoChangeHandler): NetInfoSubscription;
    fetch(): Promise<NetInfoState>;
  };
  export default NetInfo;
}
