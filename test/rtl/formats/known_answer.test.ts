/**
 * Fields at their byte offsets, computed by hand from spec/mlx5.md, and the WQE builder's
 * output: exact bytes of REG_MR, LOCAL_INV and BIND_MW UMR WQEs, and parseWqe(build(x)) = x.
 */
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import {
  CQE_OP_OWN_INIT,
  CqeOpcode,
  CqeSyndrome,
  EventType,
  FenceMode,
  MLX5_INVALID_LKEY,
  MkcAccessMode,
  MkeyMaskBit,
  PageFaultFlag,
  PageFaultSubtype,
  SYNDROME_TO_WC_STATUS,
  UmrCtrlFlag,
  WqeOpcode,
  cqeOwnedBySw,
  dataSegByteCount,
  dataSegLength,
  decodeCqe,
  decodeKlm,
  decodeMkeyContext,
  decodeMtt,
  encodeCqe,
  encodeCtrlSeg,
  encodeDataSeg,
  encodeEqe,
  encodeEqeCompletion,
  encodeEqePageFault,
  encodeKlm,
  encodeMkeyContext,
  encodeMtt,
  encodePageFaultResumeIn,
  eqeOwnedBySw,
  hasMaskBit,
  incRkey,
  makeKey,
  mkeyIndex,
  mkeyMask,
  mkeyTag,
  pageFaultResumeIn,
  syndromeToWcStatus,
  wcStatusToSyndrome,
  zeroMkeyContext,
} from '../../../src/rtl/formats/index.ts';
import type { Klm, MkeyMaskName, WcErrorStatus } from '../../../src/rtl/formats/index.ts';
import {
  buildAtomicWqe,
  buildBindMwWqe,
  buildLocalInvWqe,
  buildRdmaWqe,
  buildRegMrWqe,
  buildSendWqe,
  parseWqe,
  wqeBasicBlocks,
} from '../../../src/driver/wqe_builder.ts';
import type {
  AtomicWqeParams,
  BindMwWqeParams,
  ParsedWqe,
  RdmaWqeParams,
  RegMrWqeParams,
  SendWqeParams,
  Sge,
  WqeCommonParams,
  WqeData,
} from '../../../src/driver/wqe_builder.ts';

/** Bytes `off .. off+len` of `view` as "00 12 ab ..". */
function hex(view: DataView, off: number, len: number): string {
  const out: string[] = [];
  for (let i = 0; i < len; i++) out.push(view.getUint8(off + i).toString(16).padStart(2, '0'));
  return out.join(' ');
}

function buf(n = 1024): DataView {
  return new DataView(new ArrayBuffer(n));
}

const zeros = (n: number) => Array(n).fill('00').join(' ');

describe('constants and keys', () => {
  it('key arithmetic', () => {
    expect(mkeyIndex(0x12345678)).toBe(0x123456);
    expect(mkeyTag(0x12345678)).toBe(0x78);
    expect(makeKey(0xffffff, 0xff)).toBe(0xffffffff);
    expect(makeKey(0x123456, 0x78)).toBe(0x12345678);
    expect(incRkey(0x123456ff)).toBe(0x12345600);
    expect(incRkey(0xffffff01)).toBe(0xffffff02);
    expect(MLX5_INVALID_LKEY).toBe(0x100);
    expect(() => makeKey(0x1000000, 0)).toThrow(RangeError);
    expect(() => makeKey(0, 0x100)).toThrow(RangeError);
  });

  it('incRkey keeps the index and steps the tag modulo 256', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffff }), fc.integer({ min: 0, max: 0xff }), (idx, tag) => {
        const k = incRkey(makeKey(idx, tag));
        expect(mkeyIndex(k)).toBe(idx);
        expect(mkeyTag(k)).toBe((tag + 1) % 256);
        expect(k).toBeGreaterThanOrEqual(0);
      }),
    );
  });

  it('syndromes map to statuses and back', () => {
    expect(syndromeToWcStatus(0x01)).toBe('LOC_LEN_ERR');
    expect(syndromeToWcStatus(0x04)).toBe('LOC_PROT_ERR');
    expect(syndromeToWcStatus(0x06)).toBe('MW_BIND_ERR');
    expect(syndromeToWcStatus(0x13)).toBe('REM_ACCESS_ERR');
    expect(syndromeToWcStatus(0x22)).toBe('REM_ABORT_ERR');
    expect(syndromeToWcStatus(0x00)).toBe('GENERAL_ERR');
    expect(syndromeToWcStatus(0x99)).toBe('GENERAL_ERR');
    const statuses = [...Object.values(SYNDROME_TO_WC_STATUS), 'GENERAL_ERR'] as WcErrorStatus[];
    for (const s of statuses) expect(syndromeToWcStatus(wcStatusToSyndrome(s))).toBe(s);
    expect(wcStatusToSyndrome('GENERAL_ERR')).toBe(CqeSyndrome.GENERAL_ERR);
    expect(Object.keys(SYNDROME_TO_WC_STATUS)).toHaveLength(13);
  });

  it('mkey mask helpers', () => {
    expect(mkeyMask('LEN', 'FREE')).toBe(0x20000001);
    expect(mkeyMask('FREE', 'FREE')).toBe(0x20000000);
    expect(mkeyMask()).toBe(0);
    const names = Object.keys(MkeyMaskBit) as MkeyMaskName[];
    fc.assert(
      fc.property(fc.subarray(names), (set) => {
        const m = mkeyMask(...set);
        for (const n of names) expect(hasMaskBit(m, n)).toBe(set.includes(n));
      }),
    );
  });

  it('UMR ctrl flag values (the kernel / rdma-core naming clash is in names only)', () => {
    expect(UmrCtrlFlag).toEqual({ INLINE: 0x80, CHECK_NOT_FREE: 0x40, CHECK_FREE: 0x20, TRANSLATION_OFFSET_EN: 0x10, CHECK_QPN: 0x08 });
  });
});

describe('segments at their byte offsets', () => {
  it('ctrl seg: opmod_idx_opcode, qpn_ds, fm_ce_se, imm', () => {
    const v = buf(16);
    encodeCtrlSeg(v, 0, {
      opmod: 0,
      wqeIndex: 0x1234,
      opcode: WqeOpcode.SEND,
      qpn: 0xabcdef,
      ds: 3,
      signature: 0x5a,
      fence: FenceMode.INITIATOR_SMALL,
      ce: 2,
      se: true,
      imm: 0xdeadbeef,
    });
    expect(hex(v, 0, 16)).toBe('00 12 34 0a ab cd ef 03 5a 00 00 2a de ad be ef');
  });

  it('mkey context: status, flags byte 2, split access mode, qpn/tag, flags_pd, addresses, page size', () => {
    const v = buf(64);
    encodeMkeyContext(v, 0, {
      ...zeroMkeyContext(),
      umrEn: true,
      localRead: true,
      remoteRead: true,
      accessMode: MkcAccessMode.MTT,
      qpn: 0xffffff,
      tag: 0x42,
      remoteInval: true,
      pd: 0x123,
      startAddr: 0x1234_5678_9000,
      len: 0x2000,
      translationsOctwordSize: 4,
      logPageSize: 12,
    });
    expect(hex(v, 0, 8)).toBe('00 00 95 00 ff ff ff 42');
    expect(hex(v, 12, 4)).toBe('01 00 01 23');
    expect(hex(v, 16, 8)).toBe('00 00 12 34 56 78 90 00');
    expect(hex(v, 24, 8)).toBe('00 00 00 00 00 00 20 00');
    expect(hex(v, 52, 4)).toBe('00 00 00 04');
    expect(v.getUint8(59)).toBe(12);

    // access_mode 0x1d: bits 1:0 (01) in byte 2, bits 4:2 (111) in byte 0 bits 4:2; free = 0x40.
    encodeMkeyContext(v, 0, { ...zeroMkeyContext(), free: true, accessMode: 0x1d, atomic: true, localWrite: true });
    expect(hex(v, 0, 4)).toBe('5c 00 49 00');
    expect(decodeMkeyContext(v, 0).accessMode).toBe(0x1d);

    // byte 3 is reserved: ignored on decode. log2_page_size keeps only its low 6 bits.
    v.setUint8(3, 0xff);
    v.setUint8(59, 0xcc);
    expect(decodeMkeyContext(v, 0)).toEqual({ ...zeroMkeyContext(), free: true, accessMode: 0x1d, atomic: true, localWrite: true, logPageSize: 0x0c });
  });

  it('KLM and MTT bytes', () => {
    const v = buf(32);
    encodeKlm(v, 0, { bcount: 0x1000, key: 0x00012305, va: 0x7f00_0000_1000 });
    expect(hex(v, 0, 16)).toBe('00 00 10 00 00 01 23 05 00 00 7f 00 00 00 10 00');
    encodeMtt(v, 16, { addr: 0x12345000, read: true, write: true });
    expect(hex(v, 16, 8)).toBe('00 00 00 00 12 34 50 03');
    encodeMtt(v, 24, { addr: 0x1_0000_0000, read: false, write: false });
    expect(hex(v, 24, 8)).toBe('00 00 00 01 00 00 00 00');
    // Bits 11:2 are not address bits.
    v.setUint8(31, 0xfd);
    v.setUint8(30, 0x0f);
    expect(decodeMtt(v, 24)).toEqual({ addr: 0x1_0000_0000, read: true, write: false });
  });

  it('data seg: inline bit, byte_count 0 = 2 GiB', () => {
    const v = buf(16);
    encodeDataSeg(v, 0, { byteCount: dataSegByteCount(2 ** 31), inline: false, lkey: 0x100, addr: 0x1000 });
    expect(hex(v, 0, 16)).toBe('00 00 00 00 00 00 01 00 00 00 00 00 00 00 10 00');
    expect(dataSegLength(0)).toBe(2 ** 31);
    expect(dataSegLength(5)).toBe(5);
    expect(dataSegByteCount(5)).toBe(5);
    expect(() => dataSegByteCount(0)).toThrow(RangeError);
    expect(() => dataSegByteCount(2 ** 31 + 1)).toThrow(RangeError);
    encodeDataSeg(v, 0, { byteCount: 0x40, inline: true, lkey: 0, addr: 0 });
    expect(hex(v, 0, 4)).toBe('80 00 00 40');
  });

  it('CQE: op_own, sop_drop_qpn, wqe_counter, error syndrome', () => {
    const v = buf(64);
    encodeCqe(v, 0, {
      immInvalPkey: 0x11223344,
      byteCnt: 0x1000,
      vendorErrSynd: 0x88,
      syndrome: CqeSyndrome.LOCAL_PROT_ERR,
      wqeOpcode: WqeOpcode.UMR,
      qpn: 0x123,
      wqeCounter: 0xbeef,
      signature: 0,
      opcode: CqeOpcode.REQ_ERR,
      format: 0,
      se: false,
      owner: 1,
    });
    expect(hex(v, 36, 4)).toBe('11 22 33 44');
    expect(hex(v, 44, 4)).toBe('00 00 10 00');
    expect(hex(v, 54, 10)).toBe('88 04 25 00 01 23 be ef 00 d1');
    expect(hex(v, 0, 36)).toBe(zeros(36));

    v.setUint8(63, 0x2a); // RESP_SEND, format 2, se
    const c = decodeCqe(v, 0);
    expect([c.opcode, c.format, c.se, c.owner]).toEqual([CqeOpcode.RESP_SEND, 2, true, 0]);
  });

  it('CQE ownership: INVALID is never software-owned; the owner bit must match the pass', () => {
    expect(CQE_OP_OWN_INIT).toBe(0xf0);
    expect(cqeOwnedBySw(CQE_OP_OWN_INIT, 0, 8)).toBe(false);
    expect(cqeOwnedBySw(0xf1, 8, 8)).toBe(false);
    expect(cqeOwnedBySw(0x00, 0, 8)).toBe(true); // first pass: owner 0
    expect(cqeOwnedBySw(0x01, 0, 8)).toBe(false);
    expect(cqeOwnedBySw(0x01, 8, 8)).toBe(true); // second pass: owner 1
    expect(cqeOwnedBySw(0xd1, 15, 8)).toBe(true);
    expect(cqeOwnedBySw(0x00, 2 ** 32 + 3, 8)).toBe(true);
  });

  it('EQE: type, sub_type, owner, completion cqn, page-fault fields', () => {
    const v = buf(64);
    encodeEqe(v, 0, { type: EventType.PAGE_FAULT, subType: 0, data: new Uint8Array(28), signature: 0x77, owner: 1 });
    encodeEqePageFault(v, 0, {
      subType: PageFaultSubtype.RDMA,
      bytesCommitted: 0x100,
      rKey: 0xabcd1201,
      packetLength: 0x400,
      rdmaOpLen: 0x2000,
      rdmaVa: 0x1_0000_2000,
      flags: PageFaultFlag.RDMA | PageFaultFlag.WRITE,
      qpn: 0x45,
    });
    expect(hex(v, 0, 4)).toBe('00 0c 00 01');
    expect(hex(v, 32, 28)).toBe(
      '00 00 01 00 ab cd 12 01 00 00 04 00 00 00 20 00 00 00 00 01 00 00 20 00 06 00 00 45',
    );
    expect(hex(v, 62, 2)).toBe('77 01');

    encodeEqePageFault(v, 0, {
      subType: PageFaultSubtype.WQE,
      bytesCommitted: 0,
      wqeIndex: 0x1234,
      packetLength: 0x56,
      flags: PageFaultFlag.REQUESTOR,
      qpn: 0xabcdef,
    });
    expect(v.getUint8(3)).toBe(0);
    expect(hex(v, 32, 28)).toBe('00 00 00 00 00 00 12 34 00 00 00 56 ' + zeros(12) + ' 01 ab cd ef');

    encodeEqeCompletion(v, 0, { cqn: 0x123 });
    expect(hex(v, 32, 28)).toBe(zeros(24) + ' 00 00 01 23');
    expect(() => encodeEqePageFault(v, 0, { subType: 0, bytesCommitted: 0, wqeIndex: 0x10000, packetLength: 0, flags: 0, qpn: 0 })).toThrow(
      'wqeIndex',
    );
    expect(() =>
      encodeEqePageFault(v, 0, { subType: 1, bytesCommitted: 0, rKey: 0, packetLength: 0, rdmaOpLen: 0, rdmaVa: 2 ** 53, flags: 0, qpn: 0 }),
    ).toThrow('rdmaVa');
  });

  it('EQE ownership: the owner starts at 1 and software owns ci when the pass parity matches', () => {
    expect(eqeOwnedBySw(1, 0, 3)).toBe(false);
    expect(eqeOwnedBySw(0, 0, 3)).toBe(true);
    expect(eqeOwnedBySw(0, 7, 3)).toBe(true);
    expect(eqeOwnedBySw(0, 8, 3)).toBe(false);
    expect(eqeOwnedBySw(1, 8, 3)).toBe(true);
    expect(eqeOwnedBySw(3, 8, 3)).toBe(true);
  });

  it('PAGE_FAULT_RESUME input: opcode @0, op_mod @6, flags_qpn @8', () => {
    const v = buf(16);
    encodePageFaultResumeIn(v, 0, pageFaultResumeIn(0x45, PageFaultFlag.ERROR | PageFaultFlag.REQUESTOR));
    expect(hex(v, 0, 16)).toBe('02 04 00 00 00 00 00 00 81 00 00 45 00 00 00 00');
  });
});

// ---------------------------------------------------------------------------------------------
// WQE builder
// ---------------------------------------------------------------------------------------------

const COMMON: WqeCommonParams = { wqeIndex: 5, qpn: 0x12, signaled: true };
/** The spec's fast-registration mask: LEN|PAGE_SIZE|START_ADDR|EN_RINVAL|KEY|LR|LW|RR|RW|SMALL_FENCE|FREE. */
const FRWR_MASK = 0x209e2143;

describe('REG_MR UMR WQE', () => {
  const base: RegMrWqeParams = {
    ...COMMON,
    key: 0x00abcd07,
    access: { localWrite: true, remoteRead: true, remoteWrite: true },
    iova: 0x10000,
    length: 0x3000,
    translations: { mode: 'MTT', pages: [0x100000, 0x200000, 0x305000], logPageSize: 12 },
  };

  it('inline MTTs: exact bytes', () => {
    const v = buf();
    const ds = buildRegMrWqe(v, 0, base);
    expect(ds).toBe(12);
    expect(wqeBasicBlocks(ds)).toBe(3);
    expect(hex(v, 0, 16)).toBe('00 00 05 25 00 00 12 0c 00 00 00 08 00 ab cd 07');
    expect(v.getUint8(3)).toBe(0x25);
    expect(v.getUint8(11)).toBe(0x08); // signaled: CE = 2
    // UMR control segment.
    expect(v.getUint8(16)).toBe(0xa0);
    expect(hex(v, 16, 48)).toBe('a0 00 00 00 00 04 00 00 00 00 00 00 20 9e 21 43 ' + zeros(32));
    // Mkey segment.
    expect(hex(v, 64, 8)).toBe('00 00 bd 00 ff ff ff 07');
    expect(v.getUint8(71)).toBe(0x07);
    expect(hex(v, 76, 4)).toBe('01 00 00 00');
    expect(hex(v, 80, 8)).toBe('00 00 00 00 00 01 00 00');
    expect(hex(v, 88, 8)).toBe('00 00 00 00 00 00 30 00');
    expect(hex(v, 116, 4)).toBe('00 00 00 04'); // ALIGN(3, 8) / 2
    expect(v.getUint8(123)).toBe(12);
    // Inline MTTs, addr | 3, padded to 64 bytes.
    expect(hex(v, 128, 24)).toBe('00 00 00 00 00 10 00 03 00 00 00 00 00 20 00 03 00 00 00 00 00 30 50 03');
    expect(hex(v, 152, 40)).toBe(zeros(40));
  });

  it('remote atomic adds mask bit A and the ATOMIC permission', () => {
    const v = buf();
    buildRegMrWqe(v, 0, { ...base, access: { ...base.access, remoteAtomic: true } });
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 be 21 43');
    expect(v.getUint8(66)).toBe(0xfd);
  });

  it('a list over 64 bytes goes by pointer: flags 0x20, one data segment', () => {
    const v = buf();
    const pages = Array.from({ length: 9 }, (_, i) => 0x100000 + i * 0x1000);
    const ds = buildRegMrWqe(v, 0, {
      ...base,
      translations: { mode: 'MTT', pages, logPageSize: 12 },
      listAddr: 0x7000_0000,
      listLkey: 0x00000200,
    });
    expect(ds).toBe(9);
    expect(v.getUint8(16)).toBe(0x20);
    expect(hex(v, 20, 2)).toBe('00 08'); // ALIGN(72, 64) / 16
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 9e 21 43');
    expect(hex(v, 116, 4)).toBe('00 00 00 08'); // ALIGN(9, 8) / 2
    expect(hex(v, 128, 16)).toBe('00 00 00 80 00 00 02 00 00 00 00 00 70 00 00 00');
    expect(() => buildRegMrWqe(v, 0, { ...base, translations: { mode: 'MTT', pages, logPageSize: 12 } })).toThrow(/listAddr/);
  });

  it('KLM list: access mode KLMS, xlt_oct_size twice that of MTTs', () => {
    const v = buf();
    const klms: Klm[] = [
      { bcount: 0x1000, key: 0x300, va: 0x1000 },
      { bcount: 0x800, key: 0x300, va: 0x9000 },
    ];
    const ds = buildRegMrWqe(v, 0, { ...base, translations: { mode: 'KLM', klms } });
    expect(ds).toBe(12);
    expect(v.getUint8(16)).toBe(0xa0);
    expect(hex(v, 20, 2)).toBe('00 04');
    expect(v.getUint8(66)).toBe(0xbe);
    expect(hex(v, 116, 4)).toBe('00 00 00 08');
    expect(v.getUint8(123)).toBe(0);
    expect(decodeKlm(v, 128)).toEqual(klms[0]);
    expect(decodeKlm(v, 144)).toEqual(klms[1]);
    expect(hex(v, 160, 32)).toBe(zeros(32));
  });
});

describe('LOCAL_INV UMR WQE', () => {
  it('exact bytes', () => {
    const v = new DataView(new Uint8Array(256).fill(0xee).buffer);
    const ds = buildLocalInvWqe(v, 0, { wqeIndex: 1, qpn: 0x12, key: 0x00001234 });
    expect(ds).toBe(8);
    expect(hex(v, 0, 16)).toBe('00 00 01 25 00 00 12 08 00 00 00 00 00 00 12 34');
    expect(hex(v, 16, 48)).toBe('80 00 00 00 00 00 00 00 00 00 00 00 20 00 00 00 ' + zeros(32));
    expect(v.getUint8(64)).toBe(0x40);
    expect(hex(v, 65, 63)).toBe(zeros(63));
    expect(v.getUint8(128)).toBe(0xee); // nothing written past 8 DS
  });
});

describe('BIND_MW UMR WQE', () => {
  const bind: BindMwWqeParams = {
    wqeIndex: 2,
    qpn: 0x77,
    signaled: true,
    mwType: 2,
    mwRkey: 0x503,
    newRkey: 0x504,
    bind: { mrLkey: 0x901, addr: 0x20000, length: 0x1000, access: { remoteRead: true, remoteWrite: true } },
  };

  it('type 2 bind: 12 DS, CHECK_FREE, QPN in mask and mkey seg, KLM at 128', () => {
    const v = buf();
    expect(buildBindMwWqe(v, 0, bind)).toBe(12);
    expect(hex(v, 0, 16)).toBe('00 00 02 25 00 00 77 0c 00 00 00 08 00 00 05 03');
    expect(hex(v, 16, 8)).toBe('b0 00 00 00 00 04 00 00');
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 3c 60 41');
    expect(hex(v, 64, 8)).toBe('00 00 30 00 00 00 77 04');
    expect(hex(v, 80, 16)).toBe('00 00 00 00 00 02 00 00 00 00 00 00 00 00 10 00');
    expect(hex(v, 128, 16)).toBe('00 00 10 00 00 00 09 01 00 00 00 00 00 02 00 00');
    expect(hex(v, 144, 48)).toBe(zeros(48));
  });

  it('zero-based window: start 0, the KLM keeps the MR address', () => {
    const v = buf();
    buildBindMwWqe(v, 0, { ...bind, bind: { ...bind.bind!, zeroBased: true } });
    expect(hex(v, 80, 8)).toBe(zeros(8));
    expect(hex(v, 136, 8)).toBe('00 00 00 00 00 02 00 00');
  });

  it('type 1 bind: no CHECK_FREE, no QPN, qpn 0xffffff', () => {
    const v = buf();
    expect(buildBindMwWqe(v, 0, { ...bind, mwType: 1 })).toBe(12);
    expect(v.getUint8(16)).toBe(0x90);
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 3c 20 41');
    expect(hex(v, 68, 4)).toBe('ff ff ff 04');
  });

  it('type 2 unbind: 8 DS, CHECK_QPN, mask FREE|KEY|QPN, mkey seg free', () => {
    const v = buf();
    expect(buildBindMwWqe(v, 0, { ...bind, bind: undefined })).toBe(8);
    expect(hex(v, 16, 8)).toBe('98 00 00 00 00 00 00 00');
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 00 60 00');
    expect(hex(v, 64, 8)).toBe('40 00 00 00 ff ff ff 04');
    expect(buildBindMwWqe(v, 0, { ...bind, mwType: 1, bind: { ...bind.bind!, length: 0 } })).toBe(8);
    expect(v.getUint8(16)).toBe(0x90);
    expect(hex(v, 24, 8)).toBe('00 00 00 00 20 00 20 00');
  });
});

describe('send, RDMA and atomic WQEs', () => {
  it('SEND_IMM with two SGEs (one empty, skipped) and a fence', () => {
    const v = buf();
    const ds = buildSendWqe(v, 0, {
      wqeIndex: 0xffff,
      qpn: 0x12,
      fence: FenceMode.INITIATOR_SMALL,
      solicited: true,
      opcode: WqeOpcode.SEND_IMM,
      immData: 0xcafe,
      sgList: [
        { addr: 0x1000, length: 0x40, lkey: 0x201 },
        { addr: 0x2000, length: 0, lkey: 0x201 },
      ],
    });
    expect(ds).toBe(2);
    expect(hex(v, 0, 32)).toBe('00 ff ff 0b 00 00 12 02 00 00 00 22 00 00 ca fe 00 00 00 40 00 00 02 01 00 00 00 00 00 00 10 00');
  });

  it('inline SEND: bit31 header, data, padding', () => {
    const v = buf();
    const ds = buildSendWqe(v, 0, { wqeIndex: 0, qpn: 1, opcode: WqeOpcode.SEND, inlineData: new Uint8Array([1, 2, 3, 4, 5]) });
    expect(ds).toBe(2);
    expect(hex(v, 16, 16)).toBe('80 00 00 05 01 02 03 04 05 00 00 00 00 00 00 00');
  });

  it('RDMA_WRITE: raddr then data', () => {
    const v = buf();
    const ds = buildRdmaWqe(v, 0, {
      wqeIndex: 3,
      qpn: 1,
      opcode: WqeOpcode.RDMA_WRITE,
      remoteAddr: 0x1_2345_6000,
      rkey: 0xabcdef01,
      sgList: [{ addr: 0x5000, length: 0x100, lkey: 0x300 }],
    });
    expect(ds).toBe(3);
    expect(hex(v, 16, 16)).toBe('00 00 00 01 23 45 60 00 ab cd ef 01 00 00 00 00');
    expect(hex(v, 32, 16)).toBe('00 00 01 00 00 00 03 00 00 00 00 00 00 00 50 00');
  });

  it('ATOMIC_CS: raddr, swap then compare', () => {
    const v = buf();
    const ds = buildAtomicWqe(v, 0, {
      wqeIndex: 3,
      qpn: 1,
      opcode: WqeOpcode.ATOMIC_CS,
      remoteAddr: 0x8000,
      rkey: 0x401,
      compare: 7,
      swap: 9,
      sgList: [{ addr: 0x5000, length: 8, lkey: 0x300 }],
    });
    expect(ds).toBe(4);
    expect(v.getUint8(3)).toBe(0x11);
    expect(hex(v, 32, 16)).toBe('00 00 00 00 00 00 00 09 00 00 00 00 00 00 00 07');
  });

  it('a WQE over 63 DS throws before writing', () => {
    const v = new DataView(new Uint8Array(2048).fill(0xee).buffer);
    const sgList = Array.from({ length: 63 }, () => ({ addr: 0, length: 1, lkey: 0 }));
    expect(() => buildSendWqe(v, 0, { wqeIndex: 0, qpn: 1, opcode: WqeOpcode.SEND, sgList })).toThrow(RangeError);
    expect(v.getUint8(0)).toBe(0xee);
    expect(v.getUint8(16)).toBe(0xee);
  });

  it('RDMA_READ refuses inline data', () => {
    expect(() =>
      buildRdmaWqe(buf(), 0, { wqeIndex: 0, qpn: 1, opcode: WqeOpcode.RDMA_READ, remoteAddr: 0, rkey: 0, inlineData: new Uint8Array(4) }),
    ).toThrow();
  });
});

describe('parseWqe', () => {
  it('reports malformed WQEs as invalid instead of throwing', () => {
    const v = buf(256);
    const ctrl = { opmod: 0, wqeIndex: 0, opcode: 0x55, qpn: 1, ds: 1, signature: 0, fence: 0, ce: 0, se: false, imm: 0 };
    encodeCtrlSeg(v, 0, ctrl);
    expect(parseWqe(v, 0)).toMatchObject({ kind: 'invalid', reason: 'unknown opcode 0x55' });
    encodeCtrlSeg(v, 0, { ...ctrl, opcode: WqeOpcode.UMR, ds: 4 });
    expect(parseWqe(v, 0).kind).toBe('invalid');
    encodeCtrlSeg(v, 0, { ...ctrl, opcode: WqeOpcode.SEND, ds: 0 });
    expect(parseWqe(v, 0).kind).toBe('invalid');
    encodeCtrlSeg(v, 0, { ...ctrl, opcode: WqeOpcode.SEND, ds: 20 });
    expect(parseWqe(v, 0).kind).toBe('invalid'); // 320 bytes > 256
    encodeCtrlSeg(v, 0, { ...ctrl, opcode: WqeOpcode.SEND, ds: 2 });
    v.setUint32(16, 0x80000020); // inline segment of 32 bytes needs 3 DS
    expect(parseWqe(v, 0).kind).toBe('invalid');
  });
});

// ---------------------------------------------------------------------------------------------
// parseWqe(build(x)) round trip
// ---------------------------------------------------------------------------------------------

const u = (bits: number) => fc.integer({ min: 0, max: 2 ** bits - 1 });
const addr = fc.maxSafeNat();
const commonArb: fc.Arbitrary<WqeCommonParams> = fc.record({
  wqeIndex: u(16),
  qpn: u(24),
  signaled: fc.boolean(),
  fence: u(3),
  solicited: fc.boolean(),
});
const sgeArb: fc.Arbitrary<Sge> = fc.record({ addr, length: fc.integer({ min: 0, max: 2 ** 31 }), lkey: u(32) });
const dataArb = fc.oneof(
  fc.record({ sgList: fc.array(sgeArb, { maxLength: 8 }) }),
  fc.record({ inlineData: fc.uint8Array({ maxLength: 256 }) }),
);
const accessArb = fc.record({ localWrite: fc.boolean(), remoteWrite: fc.boolean(), remoteRead: fc.boolean(), remoteAtomic: fc.boolean() });

function expectedData(p: { sgList?: readonly Sge[]; inlineData?: Uint8Array }): WqeData[] {
  if (p.inlineData) return p.inlineData.length ? [{ kind: 'inline', data: p.inlineData }] : [];
  return (p.sgList ?? [])
    .filter((s) => s.length > 0)
    .map((s) => ({ kind: 'ptr', seg: { byteCount: s.length % 2 ** 31, inline: false, lkey: s.lkey, addr: s.addr } }));
}

function expectCtrl(w: ParsedWqe, p: WqeCommonParams, opcode: number, ds: number, imm: number): void {
  expect(w.ctrl).toEqual({
    opmod: 0,
    wqeIndex: p.wqeIndex,
    opcode,
    qpn: p.qpn,
    ds,
    signature: 0,
    fence: p.fence ?? 0,
    ce: p.signaled ? 2 : 0,
    se: p.solicited ?? false,
    imm,
  });
}

/** Builds at a random offset of a buffer full of junk and parses it back. */
function buildAndParse(build: (v: DataView, off: number) => number, off: number): { w: ParsedWqe; ds: number; v: DataView } {
  const v = new DataView(new Uint8Array(off + 1100).fill(0xa5).buffer);
  const ds = build(v, off);
  expect(ds).toBeLessThanOrEqual(63);
  expect(wqeBasicBlocks(ds)).toBeLessThanOrEqual(16);
  return { w: parseWqe(v, off), ds, v };
}

const offArb = fc.integer({ min: 0, max: 64 }).map((n) => n * 16);

describe('parseWqe(build(x)) round-trips', () => {
  it('SEND / SEND_IMM / SEND_INVAL', () => {
    const opArb = fc.oneof(
      fc.constant({ opcode: WqeOpcode.SEND } as const),
      fc.record({ opcode: fc.constant(WqeOpcode.SEND_IMM), immData: u(32) }),
      fc.record({ opcode: fc.constant(WqeOpcode.SEND_INVAL), invalidateRkey: u(32) }),
    );
    fc.assert(
      fc.property(commonArb, dataArb, opArb, offArb, (c, d, o, off) => {
        const p = { ...c, ...d, ...o } as SendWqeParams;
        const { w, ds } = buildAndParse((v, at) => buildSendWqe(v, at, p), off);
        const imm = p.opcode === WqeOpcode.SEND_IMM ? p.immData : p.opcode === WqeOpcode.SEND_INVAL ? p.invalidateRkey : 0;
        expectCtrl(w, p, p.opcode, ds, imm);
        expect(w).toEqual({ kind: 'send', ctrl: w.ctrl, data: expectedData(p) });
      }),
      { numRuns: 150 },
    );
  });

  it('RDMA_WRITE / RDMA_WRITE_IMM / RDMA_READ', () => {
    const opArb = fc.oneof(
      fc.constant({ opcode: WqeOpcode.RDMA_WRITE } as const),
      fc.record({ opcode: fc.constant(WqeOpcode.RDMA_WRITE_IMM), immData: u(32) }),
      fc.constant({ opcode: WqeOpcode.RDMA_READ } as const),
    );
    fc.assert(
      fc.property(commonArb, dataArb, opArb, addr, u(32), offArb, (c, d, o, remoteAddr, rkey, off) => {
        const data = o.opcode === WqeOpcode.RDMA_READ ? { sgList: 'sgList' in d ? d.sgList : [] } : d;
        const p = { ...c, ...data, ...o, remoteAddr, rkey } as RdmaWqeParams;
        const { w, ds } = buildAndParse((v, at) => buildRdmaWqe(v, at, p), off);
        expectCtrl(w, p, p.opcode, ds, p.opcode === WqeOpcode.RDMA_WRITE_IMM ? p.immData : 0);
        expect(w).toEqual({ kind: 'rdma', ctrl: w.ctrl, raddr: { raddr: remoteAddr, rkey }, data: expectedData(p) });
      }),
      { numRuns: 150 },
    );
  });

  it('ATOMIC_CS / ATOMIC_FA', () => {
    const opArb = fc.oneof(
      fc.record({ opcode: fc.constant(WqeOpcode.ATOMIC_CS), compare: addr, swap: addr }),
      fc.record({ opcode: fc.constant(WqeOpcode.ATOMIC_FA), add: addr }),
    );
    fc.assert(
      fc.property(commonArb, opArb, fc.array(sgeArb, { maxLength: 2 }), addr, u(32), offArb, (c, o, sgList, remoteAddr, rkey, off) => {
        const p = { ...c, ...o, sgList, remoteAddr, rkey } as AtomicWqeParams;
        const { w, ds } = buildAndParse((v, at) => buildAtomicWqe(v, at, p), off);
        expectCtrl(w, p, p.opcode, ds, 0);
        const atomic = p.opcode === WqeOpcode.ATOMIC_CS ? { swapAdd: BigInt(p.swap), compare: BigInt(p.compare) } : { swapAdd: BigInt(p.add), compare: 0n };
        expect(w).toEqual({ kind: 'atomic', ctrl: w.ctrl, raddr: { raddr: remoteAddr, rkey }, atomic, data: expectedData(p) });
      }),
      { numRuns: 100 },
    );
  });

  it('REG_MR (MTT or KLM, inline or by pointer)', () => {
    const listArb = fc.oneof(
      fc.record({
        mode: fc.constant('MTT' as const),
        pages: fc.array(u(40).map((n) => n * 4096), { maxLength: 40 }),
        logPageSize: fc.integer({ min: 12, max: 30 }),
      }),
      fc.record({
        mode: fc.constant('KLM' as const),
        klms: fc.array(fc.record({ bcount: u(31), key: u(32), va: addr }), { maxLength: 20 }),
      }),
    );
    fc.assert(
      fc.property(commonArb, listArb, u(32), accessArb, addr, addr, addr, u(32), offArb, fc.boolean(), (c, list, key, access, iova, length, listAddr, listLkey, off, byPtr) => {
        const n0 = list.mode === 'MTT' ? list.pages.length * 8 : list.klms.length * 16;
        // a list given by address is never inline (mlx5 never inlines the translations it loads, umr.c:856)
        const ptr = byPtr || n0 > 64;
        const p: RegMrWqeParams = { ...c, key, access, iova, length, translations: list, ...(ptr ? { listAddr, listLkey } : {}) };
        const { w, ds, v } = buildAndParse((b, at) => buildRegMrWqe(b, at, p), off);
        expectCtrl(w, p, WqeOpcode.UMR, ds, key);
        if (w.kind !== 'umr') return expect.fail(`kind ${w.kind}`);
        const n = list.mode === 'MTT' ? list.pages.length : list.klms.length;
        const bytes = n * (list.mode === 'MTT' ? 8 : 16);
        const inline = !ptr;
        expect(w.umrCtrl).toEqual({
          flags: inline ? 0xa0 : 0x20,
          xltOctowords: Math.ceil(bytes / 64) * 4,
          xltOffset: 0,
          mkeyMask: FRWR_MASK + (access.remoteAtomic ? 2 ** 21 : 0),
        });
        expect(w.mkeySeg).toEqual({
          ...zeroMkeyContext(),
          umrEn: true,
          localRead: true,
          localWrite: access.localWrite,
          remoteRead: access.remoteRead,
          remoteWrite: access.remoteWrite,
          atomic: access.remoteAtomic,
          accessMode: list.mode === 'MTT' ? 1 : 2,
          qpn: 0xffffff,
          tag: key & 0xff,
          remoteInval: true,
          startAddr: iova,
          len: length,
          translationsOctwordSize: (Math.ceil(n / 8) * 8) / 2 * (list.mode === 'MTT' ? 1 : 2),
          logPageSize: list.mode === 'MTT' ? list.logPageSize : 0,
        });
        if (bytes === 0) {
          expect(w.xlt).toEqual({ kind: 'none' });
        } else if (inline) {
          expect(w.xlt).toEqual({ kind: 'inline', off: off + 128, bytes: 64 });
          if (list.mode === 'MTT') {
            list.pages.forEach((a, i) => expect(decodeMtt(v, off + 128 + i * 8)).toEqual({ addr: a, read: true, write: true }));
          } else {
            list.klms.forEach((k, i) => expect(decodeKlm(v, off + 128 + i * 16)).toEqual(k));
          }
        } else {
          expect(w.xlt).toEqual({ kind: 'pointer', seg: { byteCount: Math.ceil(bytes / 64) * 64, inline: false, lkey: listLkey, addr: listAddr } });
        }
      }),
      { numRuns: 150 },
    );
  });

  it('LOCAL_INV', () => {
    fc.assert(
      fc.property(commonArb, u(32), offArb, (c, key, off) => {
        const { w, ds } = buildAndParse((v, at) => buildLocalInvWqe(v, at, { ...c, key }), off);
        expect(ds).toBe(8);
        expectCtrl(w, c, WqeOpcode.UMR, 8, key);
        expect(w).toMatchObject({
          kind: 'umr',
          umrCtrl: { flags: UmrCtrlFlag.INLINE, xltOctowords: 0, xltOffset: 0, mkeyMask: 2 ** 29 },
          mkeySeg: { ...zeroMkeyContext(), free: true },
          xlt: { kind: 'none' },
        });
      }),
    );
  });

  it('BIND_MW (type 1 and 2, bind and unbind)', () => {
    const bindArb = fc.option(
      fc.record({ mrLkey: u(32), addr, length: u(32), access: accessArb, zeroBased: fc.boolean() }),
      { nil: undefined },
    );
    fc.assert(
      fc.property(commonArb, fc.constantFrom(1 as const, 2 as const), u(32), u(32), bindArb, offArb, (c, mwType, mwRkey, newRkey, bind, off) => {
        const p: BindMwWqeParams = { ...c, mwType, mwRkey, newRkey, bind };
        const { w, ds, v } = buildAndParse((b, at) => buildBindMwWqe(b, at, p), off);
        const bound = bind !== undefined && bind.length > 0;
        expect(ds).toBe(bound ? 12 : 8);
        expectCtrl(w, p, WqeOpcode.UMR, ds, mwRkey);
        if (w.kind !== 'umr') return expect.fail(`kind ${w.kind}`);
        const names: MkeyMaskName[] = ['FREE', 'KEY'];
        if (mwType === 2) names.push('QPN');
        if (bound) names.push('LEN', 'START_ADDR', 'LW', 'RR', 'RW', 'A');
        expect(w.umrCtrl).toEqual({
          flags: 0x90 | (mwType === 2 ? (bound ? 0x20 : 0x08) : 0),
          xltOctowords: bound ? 4 : 0,
          xltOffset: 0,
          mkeyMask: mkeyMask(...names),
        });
        expect(w.mkeySeg).toEqual({
          ...zeroMkeyContext(),
          free: !bound,
          qpn: mwType === 2 && bound ? c.qpn : 0xffffff,
          tag: newRkey & 0xff,
          ...(bound
            ? {
                localWrite: bind.access.localWrite,
                remoteWrite: bind.access.remoteWrite,
                remoteRead: bind.access.remoteRead,
                atomic: bind.access.remoteAtomic,
                startAddr: bind.zeroBased ? 0 : bind.addr,
                len: bind.length,
              }
            : {}),
        });
        if (bound) {
          expect(w.xlt).toEqual({ kind: 'inline', off: off + 128, bytes: 64 });
          expect(decodeKlm(v, off + 128)).toEqual({ bcount: bind.length, key: bind.mrLkey, va: bind.addr });
        } else {
          expect(w.xlt).toEqual({ kind: 'none' });
        }
      }),
      { numRuns: 150 },
    );
  });

  it('NOP parses as nop', () => {
    const v = buf(64);
    encodeCtrlSeg(v, 0, { opmod: 0, wqeIndex: 9, opcode: WqeOpcode.NOP, qpn: 3, ds: 1, signature: 0, fence: 0, ce: 2, se: false, imm: 0 });
    expect(parseWqe(v, 0)).toMatchObject({ kind: 'nop', ctrl: { wqeIndex: 9, qpn: 3 } });
  });
});
