/** The untimed verbs-level reference model (VerbsModel) and its types. */
export { VerbsModel, type VerbsModelOptions, type CreateQpOptions } from './verbs_model.ts';
export { HostMemory } from './host_memory.ts';
export type { DmaWriteObserver } from './hca.ts';
export {
  ModelPd,
  ModelCq,
  ModelQp,
  ModelMr,
  ModelMw,
  type QpCaps,
  type HostExtent,
  type PostedSend,
  type PostedRecv,
  type RegSnapshot,
  type BindRequest,
  type MkeyObject,
  type MrDevice,
  type MwDevice,
} from './objects.ts';
export {
  VerbsAccess,
  VerbsModelError,
  WR_OPCODES,
  type VerbsErrno,
  type QpState,
  type MrType,
  type MwType,
  type WrOpcode,
  type WcOpcode,
  type WcFlag,
  type ModelSge,
  type ModelBindInfo,
  type ModelSendWr,
  type ModelRecvWr,
  type ModelWc,
  type KeyState,
} from './types.ts';
