/** The untimed reference model (the oracle of the property tests). */
export * from './types.ts';
export * from './keys.ts';
export { MkeyTable } from './mkey_table.ts';
export { translate, mergeSegments, DEFAULT_MAX_INDIRECTION, type TranslateOptions } from './translate.ts';
export * from './verbs/index.ts';
