/**
 * Objects a producer hands through a FIFO and reuses, round robin: one more than the FIFO holds,
 * so the one handed out again was pushed before every entry the FIFO can hold and has been popped
 * (its consumer must read or copy what it needs when it pops it). Hot paths use it instead of a
 * new object per push.
 */
export class ReuseRing<T> {
  private readonly items: T[] = [];
  private at = 0;
  private readonly size: number;

  /** `fifo`: the FIFO the objects go through; `make`: a new object, until the ring is full. */
  constructor(
    fifo: { readonly capacity: number },
    private readonly make: () => T,
  ) {
    this.size = fifo.capacity + 1;
  }

  /** The next object of the ring (a new one while it fills). */
  next(): T {
    if (this.items.length < this.size) {
      const x = this.make();
      this.items.push(x);
      return x;
    }
    const x = this.items[this.at];
    this.at = this.at + 1 === this.size ? 0 : this.at + 1;
    return x;
  }
}
