/**
 * The part of React Native's own declarations that `@dunwall/react-native` uses, with the
 * signatures React Native publishes (`react-native/types`, 0.72 on), trimmed to what is
 * named here. The repository does not install `react-native` (some 175 MB, and its globals
 * clash with the service's Node types), so the package is type-checked against this subset.
 * Only the package's declaration build and the repository's type check read this file: the
 * published declarations import `react-native`, and an app gets React Native's real types.
 */
declare module 'react-native' {
  import type * as React from 'react';

  // Styles (StyleSheet/StyleSheetTypes.d.ts, StyleSheet.d.ts).
  export type ColorValue = string | OpaqueColorValue;
  export type OpaqueColorValue = symbol & { __TYPE__: 'Color' };
  export type DimensionValue = number | 'auto' | `${number}%` | null;
  type Falsy = undefined | null | false | '';
  type RecursiveArray<T> = Array<T | ReadonlyArray<T> | RecursiveArray<T>>;
  /** A style registered with `StyleSheet.create`. */
  type RegisteredStyle<T> = number & { __registeredStyleBrand: T };
  export type StyleProp<T> = T | RegisteredStyle<T> | RecursiveArray<T | RegisteredStyle<T> | Falsy> | Falsy;

  export interface FlexStyle {
    alignItems?: 'flex-start' | 'flex-end' | 'center' | 'stretch' | 'baseline' | undefined;
    alignSelf?: 'auto' | 'flex-start' | 'flex-end' | 'center' | 'stretch' | 'baseline' | undefined;
    flex?: number | undefined;
    flexDirection?: 'row' | 'column' | 'row-reverse' | 'column-reverse' | undefined;
    flexGrow?: number | undefined;
    flexShrink?: number | undefined;
    flexWrap?: 'wrap' | 'nowrap' | 'wrap-reverse' | undefined;
    gap?: number | string | undefined;
    height?: DimensionValue | undefined;
    justifyContent?:
      'flex-start' | 'flex-end' | 'center' | 'space-between' | 'space-around' | 'space-evenly' | undefined;
    margin?: DimensionValue | undefined;
    marginBottom?: DimensionValue | undefined;
    marginHorizontal?: DimensionValue | undefined;
    marginLeft?: DimensionValue | undefined;
    marginRight?: DimensionValue | undefined;
    marginTop?: DimensionValue | undefined;
    marginVertical?: DimensionValue | undefined;
    maxWidth?: DimensionValue | undefined;
    minHeight?: DimensionValue | undefined;
    minWidth?: DimensionValue | undefined;
    padding?: DimensionValue | undefined;
    paddingBottom?: DimensionValue | undefined;
    paddingHorizontal?: DimensionValue | undefined;
    paddingLeft?: DimensionValue | undefined;
    paddingRight?: DimensionValue | undefined;
    paddingTop?: DimensionValue | undefined;
    paddingVertical?: DimensionValue | undefined;
    position?: 'absolute' | 'relative' | 'static' | undefined;
    right?: DimensionValue | undefined;
    top?: DimensionValue | undefined;
    width?: DimensionValue | undefined;
  }
  export interface ViewStyle extends FlexStyle {
    backgroundColor?: ColorValue | undefined;
    borderBottomColor?: ColorValue | undefined;
    borderBottomWidth?: number | undefined;
    borderRadius?: number | string | undefined;
    borderTopColor?: ColorValue | undefined;
    borderTopWidth?: number | undefined;
    opacity?: number | undefined;
  }
  export interface TextStyle extends ViewStyle {
    color?: ColorValue | undefined;
    fontSize?: number | undefined;
    fontWeight?:
      'normal' | 'bold' | '100' | '200' | '300' | '400' | '500' | '600' | '700' | '800' | '900' | number | undefined;
    lineHeight?: number | undefined;
    textAlign?: 'auto' | 'left' | 'right' | 'center' | 'justify' | undefined;
  }
  export interface ImageStyle extends FlexStyle {
    opacity?: number | undefined;
    resizeMode?: 'cover' | 'contain' | 'stretch' | 'repeat' | 'center' | undefined;
  }

  /** The styles of docs/examples/react-native/App.tsx. */
  type NamedStyles<T> = { [P in keyof T]: ViewStyle | TextStyle | ImageStyle };
  export namespace StyleSheet {
    export function create<T extends NamedStyles<T>>(styles: T & NamedStyles<T>): T;
  }

  // Insets (types/public/Insets.d.ts).
  export interface Insets {
    top?: number | undefined;
    left?: number | undefined;
    bottom?: number | undefined;
    right?: number | undefined;
  }

  // Events (Types/CoreEventTypes.d.ts), as far as the handlers below name them.
  export interface NativeSyntheticEvent<T> {
    nativeEvent: T;
    currentTarget: unknown;
    target: unknown;
    bubbles: boolean;
    cancelable: boolean;
    defaultPrevented: boolean;
    eventPhase: number;
    isTrusted: boolean;
    preventDefault(): void;
    stopPropagation(): void;
    timeStamp: number;
    type: string;
  }
  export interface NativeTouchEvent {
    identifier: string;
    locationX: number;
    locationY: number;
    pageX: number;
    pageY: number;
    target: string;
    timestamp: number;
  }
  export type GestureResponderEvent = NativeSyntheticEvent<NativeTouchEvent>;

  // Accessibility (Components/View/ViewAccessibility.d.ts).
  export type AccessibilityRole =
    | 'none'
    | 'button'
    | 'togglebutton'
    | 'link'
    | 'search'
    | 'image'
    | 'keyboardkey'
    | 'text'
    | 'adjustable'
    | 'imagebutton'
    | 'header'
    | 'summary'
    | 'alert'
    | 'checkbox'
    | 'combobox'
    | 'menu'
    | 'menubar'
    | 'menuitem'
    | 'progressbar'
    | 'radio'
    | 'radiogroup'
    | 'scrollbar'
    | 'spinbutton'
    | 'switch'
    | 'tab'
    | 'tabbar'
    | 'tablist'
    | 'timer'
    | 'list'
    | 'toolbar';
  export interface AccessibilityProps {
    accessible?: boolean | undefined;
    accessibilityLabel?: string | undefined;
    accessibilityRole?: AccessibilityRole | undefined;
    accessibilityHint?: string | undefined;
    accessibilityLiveRegion?: 'none' | 'polite' | 'assertive' | undefined;
    /** @platform ios */
    accessibilityViewIsModal?: boolean | undefined;
    /** @platform ios */
    accessibilityIgnoresInvertColors?: boolean | undefined;
    importantForAccessibility?: 'auto' | 'yes' | 'no' | 'no-hide-descendants' | undefined;
  }

  // View, Text, SafeAreaView, Image (Components/View/ViewPropTypes.d.ts, Text/Text.d.ts, ...).
  export interface ViewProps extends AccessibilityProps {
    children?: React.ReactNode | undefined;
    hitSlop?: null | Insets | number | undefined;
    nativeID?: string | undefined;
    style?: StyleProp<ViewStyle> | undefined;
    testID?: string | undefined;
  }
  export class View extends React.Component<ViewProps> {}
  export class SafeAreaView extends React.Component<ViewProps> {}

  export interface TextProps extends AccessibilityProps {
    children?: React.ReactNode | undefined;
    nativeID?: string | undefined;
    numberOfLines?: number | undefined;
    style?: StyleProp<TextStyle> | undefined;
    testID?: string | undefined;
  }
  export class Text extends React.Component<TextProps> {}

  export interface ImageURISource {
    uri?: string | undefined;
    width?: number | undefined;
    height?: number | undefined;
  }
  export type ImageSourcePropType = ImageURISource | ImageURISource[] | number;
  export interface ImageProps extends AccessibilityProps {
    source: ImageSourcePropType;
    alt?: string | undefined;
    resizeMode?: 'cover' | 'contain' | 'stretch' | 'repeat' | 'center' | undefined;
    style?: StyleProp<ImageStyle> | undefined;
    testID?: string | undefined;
  }
  export class Image extends React.Component<ImageProps> {}

  // Pressable (Components/Pressable/Pressable.d.ts).
  export interface PressableStateCallbackType {
    readonly pressed: boolean;
  }
  export interface PressableProps extends AccessibilityProps, Omit<ViewProps, 'children' | 'style' | 'hitSlop'> {
    onPress?: null | ((event: GestureResponderEvent) => void) | undefined;
    children?: React.ReactNode | ((state: PressableStateCallbackType) => React.ReactNode) | undefined;
    disabled?: null | boolean | undefined;
    hitSlop?: null | Insets | number | undefined;
    style?: StyleProp<ViewStyle> | ((state: PressableStateCallbackType) => StyleProp<ViewStyle>) | undefined;
  }
  export const Pressable: React.ForwardRefExoticComponent<PressableProps & React.RefAttributes<View>>;

  // Modal (Modal/Modal.d.ts).
  export interface ModalBaseProps {
    animationType?: 'none' | 'slide' | 'fade' | undefined;
    transparent?: boolean | undefined;
    visible?: boolean | undefined;
    /** Called on Android's back button and iOS's sheet gesture. */
    onRequestClose?: ((event: NativeSyntheticEvent<unknown>) => void) | undefined;
    onShow?: ((event: NativeSyntheticEvent<unknown>) => void) | undefined;
  }
  export interface ModalPropsIOS {
    presentationStyle?: 'fullScreen' | 'pageSheet' | 'formSheet' | 'overFullScreen' | undefined;
    supportedOrientations?:
      Array<'portrait' | 'portrait-upside-down' | 'landscape' | 'landscape-left' | 'landscape-right'> | undefined;
    onDismiss?: (() => void) | undefined;
  }
  export interface ModalPropsAndroid {
    hardwareAccelerated?: boolean | undefined;
    statusBarTranslucent?: boolean | undefined;
    navigationBarTranslucent?: boolean | undefined;
  }
  export type ModalProps = ModalBaseProps & ModalPropsIOS & ModalPropsAndroid & ViewProps;
  export class Modal extends React.Component<ModalProps> {}

  // Linking (Libraries/Linking/Linking.d.ts).
  export interface LinkingStatic {
    openURL(url: string): Promise<unknown>;
    canOpenURL(url: string): Promise<boolean>;
  }
  export const Linking: LinkingStatic;

  // AppState (AppState/AppState.d.ts, EventEmitter/RCTNativeAppEventEmitter.d.ts).
  export type AppStateStatus = 'active' | 'background' | 'inactive' | 'unknown' | 'extension';
  export type AppStateEvent = 'change' | 'memoryWarning' | 'blur' | 'focus';
  export interface NativeEventSubscription {
    remove(): void;
  }
  export interface AppStateStatic {
    currentState: AppStateStatus;
    isAvailable: boolean;
    addEventListener(type: AppStateEvent, listener: (state: AppStateStatus) => void): NativeEventSubscription;
  }
  export const AppState: AppStateStatic;
}
