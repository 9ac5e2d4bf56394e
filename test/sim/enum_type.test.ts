import { describe, expect, it } from 'vitest';
import { enumType, flagsType } from '../../src/sim/index.ts';

describe('enumType: an enumeration listed once', () => {
  it('numbers the names 0, 1, 2, ... for the trace and the logic alike, and freezes the constants', () => {
    const [T, S] = enumType('demo_state', ['IDLE', 'BUSY', 'DONE']);
    expect(S).toEqual({ IDLE: 0, BUSY: 1, DONE: 2 });
    expect([T.name, T.width, T.nameOf(S.DONE), T.valueOf('BUSY')]).toEqual(['demo_state', 2, 'DONE', 1]);
    expect(Object.isFrozen(S)).toBe(true);
    expect(() => {
      (S as { IDLE: number }).IDLE = 5;
    }).toThrow(TypeError); // ESM code is strict: a frozen object refuses the write
  });

  it('refuses a name listed twice, and names the EnumType checks refuse', () => {
    expect(() => enumType('dup', ['A', 'B', 'A'])).toThrow(/'A' listed twice/);
    expect(() => enumType('bad name', ['A'])).toThrow(/letters, digits/);
    expect(() => enumType('spaces', ['A B'])).toThrow(/no spaces/);
  });
});

describe('flagsType: a bitmask by the names of its set bits', () => {
  it('names every value of its width: set bits joined by |, an unnamed rest in hex, 0 as NONE', () => {
    const T = flagsType('pf_flags', { REQUESTOR: 1, WRITE: 2, RDMA: 4, ERROR: 0x80 }, 8);
    expect([T.width, T.entries().length]).toEqual([8, 256]);
    expect([0, 1, 3, 5, 0x81, 0x42, 0xff].map((v) => T.nameOf(v))).toEqual(['NONE', 'REQUESTOR', 'REQUESTOR|WRITE', 'REQUESTOR|RDMA', 'REQUESTOR|ERROR', 'WRITE|0x40', 'REQUESTOR|WRITE|RDMA|ERROR|0x78']);
    expect(() => flagsType('x', { A: 3 }, 4)).toThrow(/not one bit/);
    expect(() => flagsType('x', { A: 16 }, 4)).toThrow(/not one bit/);
    expect(() => flagsType('x', { A: 1, B: 1 }, 4)).toThrow(/named twice/);
    expect(() => flagsType('x', { A: 1 }, 11)).toThrow(/1\.\.10/);
  });
});
