/** Key helpers of the public API, checked at the boundary like every verb. */
import { incRkey as incKey } from '../rtl/formats/constants.ts';
import { checkU32 } from './verbs_error.ts';

/** ib_inc_rkey: the next tag, same index (`((k + 1) & 0xff) | (k & ~0xff)`); EINVAL unless a 32-bit key. */
export function incRkey(rkey: number): number {
  checkU32('incRkey: rkey', rkey);
  return incKey(rkey);
}
