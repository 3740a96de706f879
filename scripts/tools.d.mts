export declare const TOOL_FOLDERS: string[];
export declare function toolsDir(name: string): string;
export declare function ensureTools(name: string, label: string): string;
export type DebianPeer = { command: string; package: string };
export declare function ensureDebian(packages: DebianPeer[], label: string): void;
export declare const DEBIAN_PEERS: DebianPeer[];
export declare function ensureAllTools(label: string): void;
