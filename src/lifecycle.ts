// Where the instance is in its life, for /readyz and for refusing new work while draining.
export type Phase = 'starting' | 'ready' | 'draining'

export class Lifecycle {
  phase: Phase = 'starting'

  markReady (): void {
    if (this.phase === 'starting') this.phase = 'ready'
  }

  startDraining (): void {
    this.phase = 'draining'
  }

  get draining (): boolean {
    return this.phase === 'draining'
  }
}
