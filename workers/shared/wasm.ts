/**
 * The WebAssembly API the C kernels are run with (the project compiles without the DOM library,
 * which types it): each kernel module imports its memory from here and exports plain functions.
 */
export interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object, imports: object) => { exports: unknown };
  Memory: new (descriptor: { initial: number }) => WasmMemory;
}
const api = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

/** Bytes in a page of WebAssembly memory. */
export const WASM_PAGE = 65536;

/** A module compiled from its base64 text (a generated `*-wasm.ts` or `kernels.ts`). */
export function compileWasm(base64: string): object {
  return new api.Module(Buffer.from(base64, 'base64'));
}

/** An instance of `module` over a new memory of `pages` pages, and that memory. */
export function instantiateWasm<T>(module: object, pages: number): { exports: T; memory: WasmMemory } {
  const memory = new api.Memory({ initial: pages });
  return { exports: new api.Instance(module, { env: { memory } }).exports as T, memory };
}

/**
 * A kernel module's instance kept by one thread, and a bump allocator above the module's static
 * data (its exported `heap_base`), reset on every take: the caller places a call's arrays, runs
 * the kernel and copies out what it keeps before the next take. An instance whose memory grew
 * past `keepBytes` in a call is let go after it (see done), so a thread does not hold a large
 * picture's memory.
 */
export class WasmArena<T extends { heap_base(): number }> {
  private compiled: object | undefined;
  private kept: { exports: T; memory: WasmMemory } | undefined;
  private top = 0;

  constructor(private readonly base64: string, private readonly pages: number, private readonly keepBytes: number) {}

  /** The thread's instance, its allocator reset. */
  take(): { exports: T; memory: WasmMemory } {
    this.compiled ??= compileWasm(this.base64);
    this.kept ??= instantiateWasm<T>(this.compiled, this.pages);
    this.top = this.kept.exports.heap_base();
    return this.kept;
  }

  /** `bytes` of the instance's memory, 16-byte aligned: their offset. */
  alloc(bytes: number): number {
    const { memory } = this.kept!;
    const at = Math.ceil(this.top / 16) * 16;
    this.top = at + bytes;
    const short = this.top - memory.buffer.byteLength;
    if (short > 0) memory.grow(Math.ceil(short / WASM_PAGE));
    return at;
  }

  /** A copy of `a` in the instance's memory: its offset. */
  put(a: Uint8Array | Int16Array | Int32Array | Float32Array): number {
    const at = this.alloc(a.byteLength);
    this.view(at, a.byteLength).set(new Uint8Array(a.buffer, a.byteOffset, a.byteLength));
    return at;
  }

  /** `n` bytes of the instance's memory from `at`, in place: valid until the next alloc. */
  view(at: number, n: number): Uint8Array {
    return new Uint8Array(this.kept!.memory.buffer, at, n);
  }

  /**
   * `n` bytes of the instance's memory from `at`, copied out into memory that is not zeroed first
   * (`slice`'s is, as is a new Uint8Array's, and here the zeroed allocation cost far more than the
   * copy): in a document of 600 small pictures (2,745 copies of about 48 KB) the copies took
   * 1.4-1.9 s with `slice`, 1.3 s into a new Uint8Array, 0.13-0.33 s so.
   */
  bytes(at: number, n: number): Uint8Array {
    const out = Buffer.allocUnsafeSlow(n);
    out.set(this.view(at, n));
    return out;
  }

  /** After a call: lets the instance go when its memory grew past keepBytes. */
  done(): void {
    if (this.kept && this.kept.memory.buffer.byteLength > this.keepBytes) this.kept = undefined;
  }
}
