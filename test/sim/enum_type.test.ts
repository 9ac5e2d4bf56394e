import { describe, expect, it } from 'vitest';
import { enumType } from '../../src/sim/index.ts';

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
