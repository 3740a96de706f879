export declare function bundleTests(root: string, files: string[], outdir: string): Promise<{ bundle: string; inputs: Set<string> }[]>;
