// Shared by the deploy tests: asks the real app (built from the default config, the same one the
// image runs) what a probe path answers, so a probe can only name a route that exists.
import { buildTestApp, type TestContext } from '../helpers/build-app.js'

export interface RouteCheck {
  /** Status of GET path on a ready app: anything but 404 means the route exists. */
  status: (path: string) => Promise<number>
  /** Status of GET path once the app is draining (what a readiness probe sees after SIGTERM). */
  statusWhileDraining: (path: string) => Promise<number>
  /** Fastify's own list of routes, for messages. */
  printed: string
}

export async function routeCheck (t: TestContext): Promise<RouteCheck> {
  const { app } = await buildTestApp(t, { logLevel: 'silent' })
  const { app: draining } = await buildTestApp(t, { logLevel: 'silent' })
  draining.arbiter.lifecycle.startDraining()
  return {
    status: async (path) => (await app.inject({ method: 'GET', url: path })).statusCode,
    statusWhileDraining: async (path) => (await draining.inject({ method: 'GET', url: path })).statusCode,
    printed: app.printRoutes({ commonPrefix: false })
  }
}
