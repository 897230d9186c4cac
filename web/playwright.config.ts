// End-to-end tests in Debian's Chromium (never a downloaded browser), headless,
// against the production build served by `vite preview` (with the model files
// mounted by server/models.ts). Run with scripts/test/test-web.sh or `npm run test:e2e`
// after `npm run build`.
import { defineConfig } from '@playwright/test';

const PORT = Number(process.env.STEPSCORE_WEB_PORT ?? 4517);
const executablePath = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// The network is closed here and the profile is thrown away: no background traffic.
const quiet = ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run', '--disable-dev-shm-usage'];

export default defineConfig({
  testDir: './e2e',
  outputDir: './test-results/artifacts',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [['list']],
  use: {
    baseURL: `http://127.0.0.1:${PORT}/`,
    acceptDownloads: true,
    trace: 'off',
    screenshot: 'only-on-failure',
  },
  webServer: {
    command: `npx vite preview --host 127.0.0.1 --port ${PORT} --strictPort`,
    url: `http://127.0.0.1:${PORT}/`,
    reuseExistingServer: false,
    timeout: 60_000,
  },
  projects: [
    {
      name: 'chromium-webgpu',
      testIgnore: /no-webgpu\.spec\.ts/,
      use: { browserName: 'chromium', launchOptions: { executablePath, args: ['--enable-unsafe-webgpu', ...quiet] } },
    },
    {
      // Launched without --enable-unsafe-webgpu: the browser grants no adapter.
      name: 'chromium-no-webgpu',
      testMatch: /no-webgpu\.spec\.ts/,
      use: { browserName: 'chromium', launchOptions: { executablePath, args: quiet } },
    },
  ],
});
