// Starts the built server (dist/src/server.js) as a child process, as an operator would.
// `npm test` builds first (the pretest script), so dist/ is current.
import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import type { TestContext } from './build-app.js'

export const SERVER_JS = fileURLToPath(new URL('../../dist/src/server.js', import.meta.url))

export interface ServerProcess {
  child: ChildProcess
  url: string
  stdout: () => string
  stderr: () => string
  exited: Promise<{ code: number | null, signal: NodeJS.Signals | null }>
}

/** Runs the server until it prints its listening line (or exits); env is added to a clean one. */
export async function startServer (t: TestContext, env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, [SERVER_JS], {
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe']
  })
  let out = ''
  let err = ''
  child.stdout?.on('data', (chunk: Buffer) => { out += chunk.toString() })
  child.stderr?.on('data', (chunk: Buffer) => { err += chunk.toString() })
  const exited = once(child, 'exit').then(([code, signal]) => ({ code: code as number | null, signal: signal as NodeJS.Signals | null }))
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL')
      await exited
    }
  })
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start: ${err}`)), 20_000)
    const check = (): void => {
      const match = /Server listening at (http:\/\/127\.0\.0\.1:\d+)/.exec(out)
      if (match !== null) { clearTimeout(timer); resolve(match[1]) }
    }
    child.stdout?.on('data', check)
    void exited.then(() => { clearTimeout(timer); resolve('') })
  })
  return { child, url, stdout: () => out, stderr: () => err, exited }
}
