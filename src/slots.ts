// A fixed number of slots and a first-come queue of those waiting for one. Two users: admission
// (verifications in flight, with a cap on the queue beyond which a request is refused at once)
// and the judge client (calls in flight; a waiter whose deadline passes leaves the queue, so an
// overloaded judge turns into timeouts, not an unbounded pile-up).
import type { StopSignal } from './deadline.js'

export type Release = () => void

/** A cap on the queue: one more waiter is refused with `error` instead of waiting. */
export interface QueueCap {
  maxQueue: number
  error: (active: number, queued: number) => Error
}

export class Slots {
  readonly #max: number
  readonly #cap: QueueCap | undefined
  readonly #waiting: Array<() => void> = []
  #active = 0

  constructor (max: number, cap?: QueueCap) {
    this.#max = Math.max(1, max)
    this.#cap = cap
  }

  get active (): number { return this.#active }
  get queued (): number { return this.#waiting.length }

  /** A slot at once, or undefined when all are taken (then `acquire` waits for one). */
  tryAcquire (): Release | undefined {
    if (this.#active >= this.#max) return undefined
    this.#active++
    return this.#releaser()
  }

  /** Waits for a slot; throws the cap's error when the queue is full, or the signal's reason when it aborts first. Call the release once. */
  async acquire (signal?: StopSignal): Promise<Release> {
    signal?.throwIfAborted()
    const free = this.tryAcquire()
    if (free !== undefined) return free
    if (this.#cap !== undefined && this.#waiting.length >= this.#cap.maxQueue) throw this.#cap.error(this.#active, this.#waiting.length)
    return await new Promise((resolve, reject) => {
      const grant = (): void => {
        signal?.removeEventListener('abort', onAbort)
        resolve(this.#releaser())
      }
      const onAbort = (): void => {
        const index = this.#waiting.indexOf(grant)
        if (index !== -1) this.#waiting.splice(index, 1)
        reject(signal?.reason)
      }
      signal?.addEventListener('abort', onAbort)
      this.#waiting.push(grant)
    })
  }

  #releaser (): Release {
    let released = false
    return () => {
      if (released) return
      released = true
      const next = this.#waiting.shift()
      // The slot passes straight to the next waiter, so the count of active ones stays the same.
      if (next !== undefined) next()
      else this.#active--
    }
  }
}
