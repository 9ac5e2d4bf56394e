import type { Module } from './module.ts';
import type { EnumType } from './enum_type.ts';
import type { Sim } from './sim.ts';

/**
 * A traced value of a module: the thing that becomes one `$var` in the VCD. `q` is its current
 * value. A plain Signal changes at once (`setNow`): use it for values computed in a commit
 * phase or by software. Clocked state that must obey the evaluate/update split is a `Reg`.
 */
export class Signal {
  /** Current value. Read it freely; write it only through `setNow` (or `Reg.set`). */
  q: number;
  /** Trace index in the active tracer, or -1 when not traced (then tracing costs one compare). */
  tid = -1;

  constructor(
    /** The module whose scope holds this signal. */
    readonly owner: Module,
    /** Name within the scope: letters, digits and `_` only (GTKWave breaks on `:` and `[`). */
    readonly name: string,
    /** Width in bits, 1..64 (values are JS numbers, so < 2^53). */
    readonly width: number,
    init: number,
    /** For enumerations (FSM states, opcodes, syndromes): their names, shown through a filter. */
    readonly enumType: EnumType | null,
  ) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) {
      throw new Error(`signal name '${name}' in ${owner.path}: use letters, digits and '_' only`);
    }
    if (!(Number.isInteger(width) && width >= 1 && width <= 64)) {
      throw new RangeError(`signal ${owner.path}.${name}: width ${width} is not in 1..64`);
    }
    checkFits(owner.path, name, width, init);
    this.q = init;
  }

  /** The signal's full dotted path, as GTKWave names it. */
  get path(): string {
    return `${this.owner.path}.${this.name}`;
  }

  /** Changes the value now (no two-phase), tracing the change. */
  setNow(v: number): void {
    if (v !== this.q) {
      if (this.tid >= 0) this.owner.sim.tracer!.change(this, v);
      this.q = v;
    }
  }
}

/**
 * A clocked register: `tick()` writes the next value with `set`, reads of `q` see the value of
 * the previous edge, and all registers commit together after every clock edge at that time
 * (the SystemC evaluate/update split). So the order in which modules tick cannot change results.
 */
export class Reg extends Signal {
  /** The next value (meaningful while dirty). */
  d: number;
  /** Set once per cycle when first written, so a commit visits only written registers. */
  dirty = false;
  private readonly sim: Sim;

  constructor(owner: Module, name: string, width: number, init: number, enumType: EnumType | null) {
    super(owner, name, width, init, enumType);
    this.d = init;
    this.sim = owner.sim;
  }

  /** Writes the value the register takes at the end of this edge. */
  set(v: number): void {
    if (this.dirty) this.d = v;
    else if (v !== this.q) {
      this.d = v;
      this.dirty = true;
      this.sim.markDirty(this);
    }
  }
}

/** Throws a RangeError naming the signal when `v` is not an unsigned integer of `width` bits. */
export function checkFits(scope: string, name: string, width: number, v: number): void {
  if (!(Number.isInteger(v) && v >= 0 && v < 2 ** Math.min(width, 53))) {
    throw new RangeError(`signal ${scope}.${name}: value ${v} does not fit ${width} bits`);
  }
}

/**
 * A register that only shows something in the waves (a handshake pulse, the key in flight):
 * no logic reads it, so when it is not traced a write costs one compare and nothing else.
 * Traced, it behaves exactly like a Reg.
 */
export class Probe extends Reg {
  override set(v: number): void {
    if (this.tid >= 0) super.set(v);
  }
}
