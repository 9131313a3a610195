import packageJson from '../package.json' with { type: 'json' };

/**
 * The release version (semantic versioning), read from package.json: the one place it is written.
 * The executable's `--version`, the OpenAPI document and the release file names all take it from here.
 */
export const VERSION: string = packageJson.version;
