// Share links: the code travels in the URL fragment (never sent to a server), deflated and
// base64url-encoded: `#code=<...>`.

function toBase64Url(bytes) {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function fromBase64Url(text) {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(binary, (c) => c.charCodeAt(0));
}

async function pipe(bytes, stream) {
  const out = new Response(new Blob([bytes]).stream().pipeThrough(stream));
  return new Uint8Array(await out.arrayBuffer());
}

/** The fragment (without '#') carrying `code`. */
export async function encodeCode(code) {
  const bytes = new TextEncoder().encode(code);
  return `code=${toBase64Url(await pipe(bytes, new CompressionStream("deflate-raw")))}`;
}

/** The code in a fragment made by encodeCode, or null when there is none or it is damaged. */
export async function decodeCode(fragment) {
  const params = new URLSearchParams(fragment.replace(/^#/, ""));
  const packed = params.get("code");
  if (!packed) return null;
  try {
    return new TextDecoder().decode(await pipe(fromBase64Url(packed), new DecompressionStream("deflate-raw")));
  } catch {
    return null;
  }
}
