/**
 * `react-native` for the hooks test in Chromium: react-native-web's primitives, with an
 * `AppState` the test moves (foreground, background), a `Linking` that records what it
 * opens, and a `Modal` that keeps its props, so that the test can press Android's back
 * button (the Modal's `onRequestClose`, which React Native calls for it).
 */
import { createElement } from 'react';
import type { AppStateStatus, ModalProps, NativeSyntheticEvent } from 'react-native';
import { Modal as WebModal } from 'react-native-web';

export * from 'react-native-web';

const appListeners = new Set<(state: AppStateStatus) => void>();
export const AppState = {
  currentState: 'active' as AppStateStatus,
  isAvailable: true,
  addEventListener(_type: 'change', listener: (state: AppStateStatus) => void) {
    appListeners.add(listener);
    return { remove: () => void appListeners.delete(listener) };
  },
};

const opened: string[] = [];
export const Linking = {
  openURL: async (url: string) => void opened.push(url),
  canOpenURL: async () => true,
};

let modalProps: ModalProps | null = null;
export function Modal(props: ModalProps) {
  modalProps = props;
  return createElement(WebModal, props);
}

export interface NativeControls {
  setAppState(state: AppStateStatus): void;
  /** Android's back button while the Modal is shown. */
  back(): void;
  modal(): Pick<ModalProps, 'visible' | 'transparent' | 'animationType' | 'statusBarTranslucent'> | null;
  opened: string[];
}

const controls: NativeControls = {
  setAppState(state) {
    AppState.currentState = state;
    for (const l of [...appListeners]) l(state);
  },
  back() {
    modalProps?.onRequestClose?.({ nativeEvent: {} } as NativeSyntheticEvent<unknown>);
  },
  modal: () =>
    modalProps && {
      visible: modalProps.visible,
      transparent: modalProps.transparent,
      animationType: modalProps.animationType,
      statusBarTranslucent: modalProps.statusBarTranslucent,
    },
  opened,
};
(window as unknown as { native: NativeControls }).native = controls;
