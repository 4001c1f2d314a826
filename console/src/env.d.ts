/** Stylesheets imported by the console's modules: esbuild gathers them into the console's one CSS file. */
declare module '*.css';
