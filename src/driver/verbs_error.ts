/** The errno values a synchronous verbs failure carries (API.md "Constants and errors"). */
export type Errno = 'EINVAL' | 'EBUSY' | 'ENOMEM' | 'EOPNOTSUPP' | 'EPERM' | 'EFAULT' | 'ETIMEDOUT';

/**
 * A verbs call with bad arguments, or against the rules of spec/semantics.md, throws this: the
 * errno the kernel or libibverbs would return, and a message that names the rule broken.
 * Asynchronous failures are completion statuses, never throws.
 */
export class VerbsError extends Error {
  constructor(
    readonly errno: Errno,
    message: string,
  ) {
    super(`${errno}: ${message}`);
    this.name = 'VerbsError';
  }
}
