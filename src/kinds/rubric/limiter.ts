// At most `max` judge calls in flight; the rest wait in a FIFO queue. A waiter whose deadline
// passes leaves the queue, so an overloaded judge turns into timeouts, not an unbounded pile-up.

export class Limiter {
  readonly #max: number
  #active = 0
  readonly #queue: Array<() => void> = []

  constructor (max: number) {
    this.#max = Math.max(1, max)
  }

  get active (): number { return this.#active }
  get queued (): number { return this.#queue.length }

  async acquire (signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted()
    if (this.#active < this.#max) {
      this.#active++
      return this.#releaser()
    }
    return await new Promise((resolve, reject) => {
      const grant = (): void => {
        signal.removeEventListener('abort', onAbort)
        this.#active++
        resolve(this.#releaser())
      }
      const onAbort = (): void => {
        const index = this.#queue.indexOf(grant)
        if (index !== -1) this.#queue.splice(index, 1)
        reject(signal.reason)
      }
      signal.addEventListener('abort', onAbort, { once: true })
      this.#queue.push(grant)
    })
  }

  #releaser (): () => void {
    let released = false
    return () => {
      if (released) return
      released = true
      this.#active--
      this.#queue.shift()?.()
    }
  }
}
