/**
 * An enumeration traced as a plain bit vector (FSM states, opcodes, event types, syndromes).
 * GTKWave shows the names through a translate filter file written beside the VCD.
 */
export class EnumType {
  /** Bits needed to hold the largest value. */
  readonly width: number;
  private readonly byValue = new Map<number, string>();

  constructor(
    /** File-name-safe name of the type, e.g. `umr_state`; the filter file is `<vcd>.<name>.txt`. */
    readonly name: string,
    /** Value -> name. An array means values 0, 1, 2, ... */
    values: readonly string[] | Readonly<Record<number, string>>,
  ) {
    if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error(`enum type name '${name}': letters, digits, '_' only`);
    const entries: [number, string][] = Array.isArray(values)
      ? values.map((n, i) => [i, n] as [number, string])
      : Object.entries(values).map(([k, n]) => [Number(k), n] as [number, string]);
    for (const [v, n] of entries) {
      if (!Number.isInteger(v) || v < 0) throw new Error(`enum ${name}: value ${v} must be a non-negative integer`);
      if (!/^\S+$/.test(n)) throw new Error(`enum ${name}: name '${n}' must have no spaces`);
      this.byValue.set(v, n);
    }
    let max = 0;
    for (const v of this.byValue.keys()) max = Math.max(max, v);
    this.width = Math.max(1, Math.ceil(Math.log2(max + 1)));
  }

  /** The name of a value, or its hex form when unnamed. */
  nameOf(v: number): string {
    return this.byValue.get(v) ?? `0x${v.toString(16)}`;
  }

  /** The value of a name; throws for an unknown name. */
  valueOf(name: string): number {
    for (const [v, n] of this.byValue) if (n === name) return v;
    throw new Error(`enum ${this.name} has no value named '${name}'`);
  }

  /** (value, name) pairs in increasing value order. */
  entries(): [number, string][] {
    return [...this.byValue.entries()].sort((a, b) => a[0] - b[0]);
  }
}

/**
 * An enumeration listed once: its `EnumType` (for the trace) and its frozen name-to-value
 * constants (for the logic), values 0, 1, 2, ... in the order given. An FSM declares
 * `export const [UmrState, UMR] = enumType('umr_state', ['IDLE', 'FETCH', ...]);` and tests
 * `state === UMR.IDLE`: the names are checked by the compiler and never numbered by hand.
 */
export function enumType<const N extends readonly string[]>(
  name: string,
  names: N,
): readonly [EnumType, Readonly<{ [K in N[number]]: number }>] {
  const type = new EnumType(name, names);
  const values: Record<string, number> = {};
  names.forEach((n, i) => {
    if (Object.hasOwn(values, n)) throw new Error(`enum ${name}: '${n}' listed twice`);
    values[n] = i;
  });
  return [type, Object.freeze(values) as { [K in N[number]]: number }];
}

/**
 * A bitmask traced as a plain vector (page-fault flags): GTKWave's translate filter matches a
 * printed value whole, so the type names every value of `width` bits by the bits it has set,
 * `REQUESTOR|WRITE`, an unnamed remainder in hex (`RDMA|0x40`), and 0 as `NONE`. `bits` maps a
 * name to its mask (one bit each). `width` is at most 10 bits (1,024 filter lines).
 */
export function flagsType(name: string, bits: Readonly<Record<string, number>>, width: number): EnumType {
  if (!(Number.isInteger(width) && width >= 1 && width <= 10)) throw new Error(`flags ${name}: width ${width} is not in 1..10`);
  const named = Object.entries(bits).sort((a, b) => a[1] - b[1]);
  let all = 0;
  for (const [n, m] of named) {
    if (!(Number.isInteger(m) && m > 0 && (m & (m - 1)) === 0 && m < 2 ** width)) throw new Error(`flags ${name}: ${n} = ${m} is not one bit of ${width}`);
    if (all & m) throw new Error(`flags ${name}: bit ${m} named twice`);
    all |= m;
  }
  const names: Record<number, string> = {};
  for (let v = 0; v < 2 ** width; v++) {
    const parts = named.filter(([, m]) => (v & m) !== 0).map(([n]) => n);
    const rest = v & ~all;
    if (rest !== 0) parts.push(`0x${rest.toString(16)}`);
    names[v] = parts.length === 0 ? 'NONE' : parts.join('|');
  }
  return new EnumType(name, names);
}
