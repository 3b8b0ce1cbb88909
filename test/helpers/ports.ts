// A loopback port nothing listens on: bound, read, released. For servers a test starts as child
// processes (they take PORT) and for "connection refused" cases.
import { createServer } from 'node:net'

export async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise<void>((resolve) => server.close(() => resolve()))
  return port
}
