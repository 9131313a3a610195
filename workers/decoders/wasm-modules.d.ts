// The Emscripten factories inside libraw-wasm and libheif-js ship no typings of their own.
declare module 'libraw-wasm/dist/libraw.js' {
  const factory: (module: Record<string, unknown>) => Promise<Record<string, unknown>>;
  export default factory;
}
declare module 'libheif-js/libheif-wasm/libheif.js' {
  const factory: (module: Record<string, unknown>) => Promise<Record<string, unknown>>;
  export = factory;
}
