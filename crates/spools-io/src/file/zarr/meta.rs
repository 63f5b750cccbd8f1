//! A Zarr v3 array's metadata (`zarr.json`): parsed from JSON into what Spools reads
//! ([`ZarrMeta`]), and written from a layout and a [`Compressor`]. Pure: no I/O.

use serde_json::{json, Map, Value};
use spools_map::{ArrayLayout, DType};

use crate::error::ZarrError;

/// A bytes-to-bytes compressor of a Zarr array's chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Compressor {
    /// None: chunks are stored as their raw little-endian bytes (plus a CRC32C).
    #[default]
    None,
    /// Zstandard at this level (`zstd` codec, as zarr-python writes by default).
    Zstd(i32),
    /// gzip at this level, 0 to 9 (`gzip` codec).
    Gzip(u32),
}

impl std::fmt::Display for Compressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Compressor::None => f.write_str("none"),
            Compressor::Zstd(l) => write!(f, "zstd({l})"),
            Compressor::Gzip(l) => write!(f, "gzip({l})"),
        }
    }
}

/// One bytes-to-bytes codec of a chain, in encoding order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BytesCodec {
    /// Zstandard (level, whether frames carry zstd's own checksum).
    Zstd(i32, bool),
    /// gzip.
    Gzip(u32),
    /// CRC32C of the bytes before it, appended as 4 little-endian bytes.
    Crc32c,
}

/// A codec chain from an array (or inner chunk) to bytes: the `bytes` codec's byte order
/// and the bytes-to-bytes codecs after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Codecs {
    /// Elements are stored big-endian.
    pub(crate) big_endian: bool,
    /// The bytes-to-bytes codecs, in encoding order.
    pub(crate) after: Vec<BytesCodec>,
}

/// How a stored key (an outer chunk) holds its data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Chain {
    /// One chunk per key.
    Plain(Codecs),
    /// `sharding_indexed`: inner chunks of `inner` shape, each encoded by `codecs`, and an
    /// index of (offset, length) pairs.
    Sharded {
        /// The inner chunks' shape.
        inner: Vec<u64>,
        /// The inner chunks' codecs.
        codecs: Codecs,
        /// The index's codecs: byte order and whether a CRC32C follows it.
        index_big_endian: bool,
        /// The index carries a CRC32C.
        index_crc: bool,
        /// The index is at the end of the shard (else at its start).
        index_at_end: bool,
    },
}

/// How chunk keys are spelled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Keys {
    /// `default` (`c/0/1`) rather than `v2` (`0.1`).
    pub(crate) default: bool,
    /// The separator, `/` or `.`.
    pub(crate) sep: char,
}

/// Largest chunk (inner chunk of a shard) Spools reads or writes, in bytes.
pub(crate) const MAX_CHUNK_BYTES: u64 = 1 << 32;

/// Most inner chunks in one shard.
pub(crate) const MAX_CHUNKS_PER_SHARD: u64 = 1 << 24;

/// What Spools reads of a Zarr v3 array's `zarr.json`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ZarrMeta {
    /// The array's shape.
    pub shape: Vec<u64>,
    /// The element type.
    pub dtype: DType,
    /// The data type as Zarr names it (`raw_bytes(length_bytes=N)` for a configured
    /// `raw_bytes`).
    pub data_type: String,
    /// The shape of the chunk grid's chunks (the shards, for a sharded array).
    pub grid: Vec<u64>,
    /// The inner chunks' shape, for a sharded array.
    pub inner: Option<Vec<u64>>,
    /// The codecs, by name, in encoding order (for `spools ls`).
    pub codec_names: Vec<String>,
    /// Spools wrote every chunk: a missing one is lost, not fill value.
    pub complete: bool,
    /// The layout the array was written from, when Spools wrote it.
    pub written_from: Option<String>,
    /// One element of fill value, as little-endian bytes.
    pub(crate) fill: Vec<u8>,
    pub(crate) chain: Chain,
    pub(crate) keys: Keys,
}

/// The `data_type` Spools writes for an element type: its Zarr name, and for `bytes(n)`
/// the `raw_bytes` data type of zarr-python with `length_bytes` n, which zarr-python
/// (3.1 and later) and tensorstore both open. (The core spec's `r<bits>`, which Spools
/// wrote before, is refused by zarr-python; it is still read.)
pub(crate) fn data_type_json(d: DType) -> Value {
    match (d, d.long_name()) {
        (_, Some(name)) => json!(name),
        (DType::Bytes(n), None) => {
            json!({"name": "raw_bytes", "configuration": {"length_bytes": n}})
        }
        (d, None) => json!(d.to_string()),
    }
}

/// The element type of a `data_type` value and its name as `spools ls` shows it.
fn data_type_of(v: &Value) -> Result<(DType, String), ZarrError> {
    let unsupported = || ZarrError::DataType(v.to_string());
    let name = match v {
        Value::String(s) => s.as_str(),
        Value::Object(o) if o.get("name").and_then(Value::as_str) == Some("raw_bytes") => {
            let n = o
                .get("configuration")
                .and_then(|c| c.get("length_bytes"))
                .and_then(Value::as_u64)
                .filter(|&n| n > 0)
                .ok_or_else(|| {
                    json_err("raw_bytes needs a configuration with a positive length_bytes")
                })?;
            return Ok((DType::Bytes(n), format!("raw_bytes(length_bytes={n})")));
        }
        _ => return Err(unsupported()),
    };
    if name == "bool" {
        return Ok((DType::U8, name.to_string()));
    }
    if let Some(d) = DType::from_long_name(name) {
        return Ok((d, name.to_string()));
    }
    match name.strip_prefix('r').and_then(|b| b.parse::<u64>().ok()) {
        Some(bits) if bits > 0 && bits % 8 == 0 => Ok((DType::Bytes(bits / 8), name.to_string())),
        _ => Err(unsupported()),
    }
}

const BASE64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// `bytes` in standard base64 with padding (RFC 4648), the form zarr-python and
/// tensorstore give a `raw_bytes` fill value.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let b = [
            c[0],
            c.get(1).copied().unwrap_or(0),
            c.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for (i, shift) in [18u32, 12, 6, 0].into_iter().enumerate() {
            out.push(if i <= c.len() {
                char::from(BASE64[((n >> shift) & 63) as usize])
            } else {
                '='
            });
        }
    }
    out
}

/// Standard base64 (padding optional), or `None` if `text` is not that.
fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() / 4 * 3 + 2);
    for c in body.as_bytes().chunks(4) {
        let mut n = 0u32;
        for (i, &ch) in c.iter().enumerate() {
            let v = BASE64.iter().position(|&b| b == ch)? as u32;
            n |= v << (18 - 6 * i as u32);
        }
        let got = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
        out.extend_from_slice(&got[..c.len() - 1]);
    }
    Some(out)
}

/// The size of the unit a big-endian `bytes` codec swaps (a complex number's parts are
/// swapped separately; raw bits are never swapped).
pub(crate) fn swap_unit(d: DType) -> usize {
    match d {
        DType::C64 => 4,
        DType::C128 => 8,
        DType::Bytes(_) => 1,
        d => d.size() as usize,
    }
}

/// One element of fill value for `d` from its JSON form.
fn fill_bytes(v: &Value, d: DType, name: &str) -> Result<Vec<u8>, ZarrError> {
    let bad = || ZarrError::FillValue {
        value: v.to_string(),
        dtype: name.to_string(),
    };
    let float = |v: &Value, bytes: usize| -> Result<Vec<u8>, ZarrError> {
        let x = match v {
            Value::Number(n) => n.as_f64().ok_or_else(bad)?,
            Value::String(s) => match s.as_str() {
                "NaN" => f64::NAN,
                "Infinity" => f64::INFINITY,
                "-Infinity" => f64::NEG_INFINITY,
                h => {
                    let hex = h.strip_prefix("0x").ok_or_else(bad)?;
                    let bits = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
                    return Ok(match bytes {
                        4 => u32::try_from(bits)
                            .map_err(|_| bad())?
                            .to_le_bytes()
                            .to_vec(),
                        _ => bits.to_le_bytes().to_vec(),
                    });
                }
            },
            _ => return Err(bad()),
        };
        Ok(match bytes {
            4 => (x as f32).to_le_bytes().to_vec(),
            _ => x.to_le_bytes().to_vec(),
        })
    };
    let int = |v: &Value, size: u64, signed: bool| -> Result<Vec<u8>, ZarrError> {
        let (lo, hi) = if signed {
            (-(1i128 << (size * 8 - 1)), (1i128 << (size * 8 - 1)) - 1)
        } else {
            (0, (1i128 << (size * 8)) - 1)
        };
        let x: i128 = match v {
            Value::Bool(b) if name == "bool" => i128::from(*b),
            Value::Number(n) => n
                .as_i64()
                .map(i128::from)
                .or_else(|| n.as_u64().map(i128::from))
                .ok_or_else(bad)?,
            _ => return Err(bad()),
        };
        if x < lo || x > hi {
            return Err(bad());
        }
        Ok(x.to_le_bytes()[..size as usize].to_vec())
    };
    match d {
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => int(v, d.size(), false),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => int(v, d.size(), true),
        DType::F32 => float(v, 4),
        DType::F64 => float(v, 8),
        DType::C64 | DType::C128 => {
            let part = d.size() as usize / 2;
            match v.as_array().map(Vec::as_slice) {
                Some([re, im]) => Ok([float(re, part)?, float(im, part)?].concat()),
                _ => Err(bad()),
            }
        }
        DType::Bytes(n) => {
            // A list of byte values (what Spools wrote as `r<bits>`), or base64 (what
            // zarr-python and tensorstore write, and Spools now writes).
            let b: Vec<u8> = match v {
                Value::String(s) => base64_decode(s).ok_or_else(bad)?,
                Value::Array(a) => a
                    .iter()
                    .map(|b| {
                        b.as_u64()
                            .and_then(|b| u8::try_from(b).ok())
                            .ok_or_else(bad)
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(bad()),
            };
            if b.len() as u64 != n {
                return Err(bad());
            }
            Ok(b)
        }
    }
}

/// The JSON form of a zero fill value for `d`.
fn zero_fill(d: DType) -> Value {
    match d {
        DType::F32 | DType::F64 => json!(0.0),
        DType::C64 | DType::C128 => json!([0.0, 0.0]),
        DType::Bytes(n) => Value::String(base64_encode(&vec![0; n as usize])),
        _ => json!(0),
    }
}

fn json_err(e: impl std::fmt::Display) -> ZarrError {
    ZarrError::Json(e.to_string())
}

fn field<'a>(o: &'a Map<String, Value>, k: &'static str) -> Result<&'a Value, ZarrError> {
    o.get(k).ok_or(ZarrError::Lacks(k))
}

fn shape_of(v: &Value, what: &'static str) -> Result<Vec<u64>, ZarrError> {
    v.as_array()
        .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<Vec<_>>>())
        .ok_or_else(|| ZarrError::Json(format!("{what} must be a list of non-negative integers")))
}

/// A named configuration `{"name": .., "configuration": {..}}` (or a bare name string).
fn named(v: &Value) -> Result<(String, Map<String, Value>), ZarrError> {
    match v {
        Value::String(s) => Ok((s.clone(), Map::new())),
        Value::Object(o) => {
            let name = field(o, "name")?
                .as_str()
                .ok_or_else(|| json_err("a codec or grid name must be a string"))?
                .to_string();
            let conf = match o.get("configuration") {
                None => Map::new(),
                Some(Value::Object(c)) => c.clone(),
                Some(_) => return Err(json_err("configuration must be an object")),
            };
            Ok((name, conf))
        }
        _ => Err(json_err("a codec must be a name or an object")),
    }
}

fn endian(conf: &Map<String, Value>) -> Result<bool, ZarrError> {
    match conf.get("endian").and_then(Value::as_str) {
        None | Some("little") => Ok(false),
        Some("big") => Ok(true),
        Some(e) => Err(ZarrError::Codec {
            name: "bytes".into(),
            why: format!("endian {e:?} is neither \"little\" nor \"big\""),
        }),
    }
}

const SUPPORTED: &str =
    "Spools reads bytes, sharding_indexed, crc32c, zstd and gzip (transpose and blosc are not supported)";

/// Parses a codec list that must be `bytes` then bytes-to-bytes codecs (inside a shard,
/// or a whole chain of an unsharded array without sharding).
fn codecs(list: &[Value]) -> Result<Codecs, ZarrError> {
    let mut it = list.iter();
    let first = it.next().ok_or(ZarrError::Lacks("codecs"))?;
    let (name, conf) = named(first)?;
    if name != "bytes" {
        return Err(ZarrError::Codec {
            name,
            why: format!("the chain must start with \"bytes\" here; {SUPPORTED}"),
        });
    }
    let big_endian = endian(&conf)?;
    let mut after = Vec::new();
    for c in it {
        let (name, conf) = named(c)?;
        after.push(match name.as_str() {
            "zstd" => BytesCodec::Zstd(
                conf.get("level").and_then(Value::as_i64).unwrap_or(0) as i32,
                conf.get("checksum")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            ),
            "gzip" => {
                BytesCodec::Gzip(conf.get("level").and_then(Value::as_u64).unwrap_or(5) as u32)
            }
            "crc32c" => BytesCodec::Crc32c,
            _ => {
                return Err(ZarrError::Codec {
                    name,
                    why: SUPPORTED.into(),
                })
            }
        });
    }
    Ok(Codecs { big_endian, after })
}

fn codec_names(list: &[Value], out: &mut Vec<String>) {
    for c in list {
        if let Ok((name, conf)) = named(c) {
            if name == "sharding_indexed" {
                let mut inner = Vec::new();
                if let Some(Value::Array(l)) = conf.get("codecs") {
                    codec_names(l, &mut inner);
                }
                out.push(format!("sharding_indexed[{}]", inner.join(", ")));
            } else {
                out.push(name);
            }
        }
    }
}

impl ZarrMeta {
    /// Parses `zarr.json`.
    ///
    /// # Errors
    /// [`ZarrError`]: what is malformed or unsupported.
    pub fn parse(text: &[u8]) -> Result<ZarrMeta, ZarrError> {
        let v: Value = serde_json::from_slice(text).map_err(json_err)?;
        let o = v.as_object().ok_or_else(|| json_err("not a JSON object"))?;
        match (
            o.get("zarr_format").and_then(Value::as_u64),
            o.get("node_type").and_then(Value::as_str),
        ) {
            (Some(3), Some("array")) => {}
            (f, n) => {
                return Err(ZarrError::NotArray(format!(
                    "zarr_format {f:?}, node_type {n:?}"
                )))
            }
        }
        let shape = shape_of(field(o, "shape")?, "shape")?;
        if shape.is_empty() {
            return Err(ZarrError::Scalar);
        }
        let (dtype, data_type) = data_type_of(field(o, "data_type")?)?;
        let fill = fill_bytes(field(o, "fill_value")?, dtype, &data_type)?;
        let (grid_name, grid_conf) = named(field(o, "chunk_grid")?)?;
        if grid_name != "regular" {
            return Err(ZarrError::GridName(grid_name));
        }
        let grid = shape_of(field(&grid_conf, "chunk_shape")?, "chunk_shape")?;
        if grid.len() != shape.len() || grid.contains(&0) {
            return Err(ZarrError::Grid(format!(
                "chunk shape {grid:?} does not fit an array of shape {shape:?}"
            )));
        }
        let keys = match o.get("chunk_key_encoding") {
            None => Keys {
                default: true,
                sep: '/',
            },
            Some(k) => {
                let (name, conf) = named(k)?;
                let sep = conf.get("separator").and_then(Value::as_str);
                match (name.as_str(), sep) {
                    ("default", None | Some("/")) => Keys {
                        default: true,
                        sep: '/',
                    },
                    ("default", Some(".")) => Keys {
                        default: true,
                        sep: '.',
                    },
                    ("v2", None | Some(".")) => Keys {
                        default: false,
                        sep: '.',
                    },
                    ("v2", Some("/")) => Keys {
                        default: false,
                        sep: '/',
                    },
                    _ => return Err(ZarrError::KeyEncoding(k.to_string())),
                }
            }
        };
        let list = field(o, "codecs")?
            .as_array()
            .ok_or_else(|| json_err("codecs must be a list"))?;
        let mut names = Vec::new();
        codec_names(list, &mut names);
        let chain = match list.first().map(named).transpose()? {
            Some((name, conf)) if name == "sharding_indexed" => {
                if list.len() > 1 {
                    return Err(ZarrError::Codec {
                        name: "sharding_indexed".into(),
                        why: "codecs after sharding_indexed are not supported".into(),
                    });
                }
                let inner = shape_of(field(&conf, "chunk_shape")?, "chunk_shape")?;
                if inner.len() != shape.len()
                    || inner.iter().zip(&grid).any(|(&i, &g)| i == 0 || g % i != 0)
                {
                    return Err(ZarrError::Grid(format!(
                        "inner chunk shape {inner:?} does not divide the shard shape {grid:?}"
                    )));
                }
                let inner_codecs = codecs(
                    field(&conf, "codecs")?
                        .as_array()
                        .ok_or_else(|| json_err("sharding codecs must be a list"))?,
                )?;
                let default_index = [json!({"name": "bytes"}), json!({"name": "crc32c"})];
                let index = codecs(
                    conf.get("index_codecs")
                        .and_then(Value::as_array)
                        .map_or(&default_index[..], Vec::as_slice),
                )?;
                let index_crc = match index.after.as_slice() {
                    [] => false,
                    [BytesCodec::Crc32c] => true,
                    _ => {
                        return Err(ZarrError::Codec {
                            name: "index_codecs".into(),
                            why: "a shard index may only have bytes and crc32c".into(),
                        })
                    }
                };
                let index_at_end = match conf.get("index_location").and_then(Value::as_str) {
                    None | Some("end") => true,
                    Some("start") => false,
                    Some(l) => {
                        return Err(ZarrError::Codec {
                            name: "sharding_indexed".into(),
                            why: format!("index_location {l:?}"),
                        })
                    }
                };
                Chain::Sharded {
                    inner,
                    codecs: inner_codecs,
                    index_big_endian: index.big_endian,
                    index_crc,
                    index_at_end,
                }
            }
            _ => Chain::Plain(codecs(list)?),
        };
        // Sizes a reader must be able to hold: hostile metadata is refused here, before
        // anything is allocated or iterated for it.
        let elem = dtype.size();
        let chunk = match &chain {
            Chain::Sharded { inner, .. } => inner.as_slice(),
            Chain::Plain(_) => grid.as_slice(),
        };
        let bytes = |dims: &[u64]| dims.iter().try_fold(elem, |t, &n| t.checked_mul(n));
        if bytes(&shape).is_none() {
            return Err(ZarrError::Limit(format!("shape {shape:?} overflows")));
        }
        match bytes(chunk) {
            Some(b) if b <= MAX_CHUNK_BYTES => {}
            _ => {
                return Err(ZarrError::Limit(format!(
                    "chunks of shape {chunk:?} hold more than {MAX_CHUNK_BYTES} bytes"
                )))
            }
        }
        let per_shard = grid
            .iter()
            .zip(chunk)
            .try_fold(1u64, |t, (&g, &c)| t.checked_mul(g / c));
        if per_shard.is_none_or(|n| n > MAX_CHUNKS_PER_SHARD) {
            return Err(ZarrError::Limit(format!(
                "shards of {grid:?} hold more than {MAX_CHUNKS_PER_SHARD} chunks of {chunk:?}"
            )));
        }
        let spools = o
            .get("attributes")
            .and_then(|a| a.get("spools"))
            .and_then(Value::as_object);
        Ok(ZarrMeta {
            shape,
            dtype,
            data_type,
            inner: match &chain {
                Chain::Sharded { inner, .. } => Some(inner.clone()),
                Chain::Plain(_) => None,
            },
            grid,
            codec_names: names,
            complete: spools
                .and_then(|s| s.get("complete"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            written_from: spools
                .and_then(|s| s.get("layout"))
                .and_then(Value::as_str)
                .map(str::to_string),
            fill,
            chain,
            keys,
        })
    }

    /// The shape of the chunks a key decodes into (the inner chunks of a shard).
    pub(crate) fn chunk_shape(&self) -> &[u64] {
        self.inner.as_deref().unwrap_or(&self.grid)
    }

    /// The number of keys (outer chunks) along each dimension.
    pub(crate) fn keys_per_dim(&self) -> Vec<u64> {
        self.shape
            .iter()
            .zip(&self.grid)
            .map(|(&n, &g)| n.div_ceil(g))
            .collect()
    }

    /// The store key of the outer chunk at grid coordinates `at`, relative to the array's
    /// directory.
    pub(crate) fn key(&self, at: &[u64]) -> String {
        let s = self.keys.sep.to_string();
        let coords = at.iter().map(u64::to_string).collect::<Vec<_>>().join(&s);
        if self.keys.default {
            format!("c{s}{coords}")
        } else {
            coords
        }
    }

    /// The element type and shape, as a mismatch message shows them.
    pub fn dataset(&self) -> String {
        format!("{}{:?}", self.dtype, self.shape)
    }
}

/// The `zarr.json` Spools writes for `layout`'s dataset: chunks of `chunks`, in shards of
/// `shards` when given, compressed by `compressor`, every chunk (and the shard index)
/// followed by a CRC32C.
pub(crate) fn to_json(
    layout: &ArrayLayout,
    spec: &str,
    chunks: &[u64],
    shards: Option<&[u64]>,
    compressor: Compressor,
) -> Vec<u8> {
    let d = layout.dtype();
    let mut chain = vec![if d.size() == 1 || matches!(d, DType::Bytes(_)) {
        json!({"name": "bytes"})
    } else {
        json!({"name": "bytes", "configuration": {"endian": "little"}})
    }];
    match compressor {
        Compressor::None => {}
        Compressor::Zstd(level) => chain
            .push(json!({"name": "zstd", "configuration": {"level": level, "checksum": false}})),
        Compressor::Gzip(level) => {
            chain.push(json!({"name": "gzip", "configuration": {"level": level}}))
        }
    }
    chain.push(json!({"name": "crc32c"}));
    let (grid, codecs) = match shards {
        Some(s) => (
            s.to_vec(),
            vec![json!({"name": "sharding_indexed", "configuration": {
                "chunk_shape": chunks,
                "codecs": chain,
                "index_codecs": [
                    {"name": "bytes", "configuration": {"endian": "little"}},
                    {"name": "crc32c"}
                ],
                "index_location": "end"
            }})],
        ),
        None => (chunks.to_vec(), chain),
    };
    let v = json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": layout.shape(),
        "data_type": data_type_json(d),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": grid}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": zero_fill(d),
        "codecs": codecs,
        "attributes": {"spools": {
            "layout": spec,
            "version": env!("CARGO_PKG_VERSION"),
            "complete": true
        }},
        "storage_transformers": []
    });
    let mut out = serde_json::to_vec_pretty(&v).unwrap_or_default();
    out.push(b'\n');
    out
}

/// A Zarr format spec: the chunk shape, the shard shape (if sharded), the compressor.
pub(crate) type Spec = (Vec<u64>, Option<Vec<u64>>, Compressor);

/// Parses the arguments of `zarr(chunk=64x64,shard=512x512,codec=zstd,level=3)`: the
/// chunk shape, the shard shape and the compressor.
///
/// # Errors
/// [`ZarrError::Spec`].
pub(crate) fn parse_spec(args: &str) -> Result<Spec, ZarrError> {
    let bad = |why: String| ZarrError::Spec(why);
    let dims = |v: &str| -> Result<Vec<u64>, ZarrError> {
        v.split('x')
            .map(|n| n.trim().parse::<u64>().ok().filter(|&n| n > 0))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                bad(format!(
                    "{v:?} is not a shape like 64x64 of positive integers"
                ))
            })
    };
    let (mut chunks, mut shards, mut codec, mut level) = (None, None, "none", None);
    for kv in args.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| bad(format!("{kv:?} is not key=value")))?;
        match k.trim() {
            "chunk" | "chunks" => chunks = Some(dims(v)?),
            "shard" | "shards" => shards = Some(dims(v)?),
            "codec" | "compressor" => codec = v.trim(),
            "level" => {
                level = Some(
                    v.trim()
                        .parse::<i32>()
                        .map_err(|_| bad(format!("level {v:?} is not an integer")))?,
                )
            }
            other => {
                return Err(bad(format!(
                    "unknown key {other:?} (keys: chunk, shard, codec, level)"
                )))
            }
        }
    }
    let chunks = chunks.ok_or_else(|| bad("chunk=AxB.. is required".into()))?;
    if let Some(s) = &shards {
        if s.len() != chunks.len() || s.iter().zip(&chunks).any(|(s, c)| s % c != 0) {
            return Err(bad(format!(
                "shard shape {s:?} must have the chunk shape's {} dimensions, each a multiple of the chunk's {chunks:?}",
                chunks.len()
            )));
        }
    }
    let compressor = match (codec, level) {
        ("none", None) => Compressor::None,
        ("zstd", l) => Compressor::Zstd(l.unwrap_or(3)),
        ("gzip", l) => Compressor::Gzip(match l.unwrap_or(5) {
            l @ 0..=9 => l as u32,
            l => return Err(bad(format!("gzip level {l} is not 0 to 9"))),
        }),
        ("none", Some(_)) => return Err(bad("level needs codec=zstd or codec=gzip".into())),
        (c, _) => return Err(bad(format!("codec {c:?} (codecs: none, zstd, gzip)"))),
    };
    Ok((chunks, shards, compressor))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(s: &str) -> ArrayLayout {
        match s.parse::<spools_map::Layout>() {
            Ok(spools_map::Layout::Array(a)) => a,
            other => unreachable!("{other:?}"),
        }
    }

    #[test]
    fn written_metadata_parses_back() {
        let l = layout("f32[100,60] block,* on 2x1");
        for (shards, comp) in [
            (Some(&[50u64, 60][..]), Compressor::Zstd(3)),
            (None, Compressor::None),
            (Some(&[20, 20][..]), Compressor::Gzip(1)),
        ] {
            let j = to_json(&l, "f32[100,60] block,* on 2x1", &[10, 20], shards, comp);
            let m = ZarrMeta::parse(&j).unwrap_or_else(|e| unreachable!("{e}"));
            assert_eq!(m.shape, [100, 60]);
            assert_eq!(m.dtype, DType::F32);
            assert_eq!(m.fill, vec![0; 4]);
            assert!(m.complete);
            assert_eq!(m.chunk_shape(), [10, 20]);
            assert_eq!(m.grid, shards.unwrap_or(&[10, 20]));
            assert_eq!(m.key(&[1, 2]), "c/1/2");
            let want_after = match comp {
                Compressor::None => vec![BytesCodec::Crc32c],
                Compressor::Zstd(l) => vec![BytesCodec::Zstd(l, false), BytesCodec::Crc32c],
                Compressor::Gzip(l) => vec![BytesCodec::Gzip(l), BytesCodec::Crc32c],
            };
            let c = match &m.chain {
                Chain::Sharded {
                    codecs,
                    index_crc,
                    index_at_end,
                    ..
                } => {
                    assert!(*index_crc && *index_at_end);
                    codecs
                }
                Chain::Plain(c) => c,
            };
            assert_eq!(c.after, want_after);
        }
    }

    #[test]
    fn foreign_metadata_is_read_or_refused_by_name() {
        let base = |codecs: &str, extra: &str| {
            format!(
                r#"{{"zarr_format":3,"node_type":"array","shape":[4,6],"data_type":"int16",
                "chunk_grid":{{"name":"regular","configuration":{{"chunk_shape":[2,3]}}}},
                "fill_value":-7,"codecs":{codecs}{extra}}}"#
            )
        };
        let m = ZarrMeta::parse(
            base(
                r#"[{"name":"bytes","configuration":{"endian":"big"}},{"name":"zstd","configuration":{"level":0}}]"#,
                r#","chunk_key_encoding":{"name":"v2","configuration":{"separator":"."}}"#,
            )
            .as_bytes(),
        )
        .unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(m.fill, (-7i16).to_le_bytes());
        assert_eq!(m.key(&[1, 0]), "1.0");
        assert!(!m.complete);
        assert_eq!(
            m.chain,
            Chain::Plain(Codecs {
                big_endian: true,
                after: vec![BytesCodec::Zstd(0, false)]
            })
        );
        let e = ZarrMeta::parse(base(r#"[{"name":"bytes"},{"name":"blosc"}]"#, "").as_bytes());
        assert!(
            matches!(e, Err(ZarrError::Codec { ref name, .. }) if name == "blosc"),
            "{e:?}"
        );
        let e = ZarrMeta::parse(base(r#"[{"name":"transpose"},{"name":"bytes"}]"#, "").as_bytes());
        assert!(matches!(e, Err(ZarrError::Codec { .. })), "{e:?}");
        assert!(ZarrMeta::parse(b"{").is_err());
        assert!(ZarrMeta::parse(br#"{"zarr_format":2}"#).is_err());
        let e = ZarrMeta::parse(
            base(r#"[{"name":"bytes"}]"#, "")
                .replace("-7", "70000")
                .as_bytes(),
        );
        assert!(matches!(e, Err(ZarrError::FillValue { .. })), "{e:?}");
        let e = ZarrMeta::parse(
            base(r#"[{"name":"bytes"}]"#, "")
                .replace("int16", "float16")
                .as_bytes(),
        );
        assert!(matches!(e, Err(ZarrError::DataType(_))), "{e:?}");
        // Sizes no reader could hold are refused before anything is allocated for them.
        for (from, to) in [
            (r#""shape":[4,6]"#, r#""shape":[18446744073709551615,6]"#),
            (r#""chunk_shape":[2,3]"#, r#""chunk_shape":[4294967296,3]"#),
        ] {
            let text = base(r#"[{"name":"bytes"}]"#, "").replace(from, to);
            assert_ne!(text, base(r#"[{"name":"bytes"}]"#, ""), "{from}");
            let e = ZarrMeta::parse(text.as_bytes());
            assert!(matches!(e, Err(ZarrError::Limit(_))), "{to}: {e:?}");
        }
        let many = base(
            r#"[{"name":"sharding_indexed","configuration":{"chunk_shape":[1,1],"codecs":[{"name":"bytes"}]}}]"#,
            "",
        )
        .replace(r#""chunk_shape":[2,3]"#, r#""chunk_shape":[65536,65536]"#)
        .replace(r#""shape":[4,6]"#, r#""shape":[65536,65536]"#);
        let e = ZarrMeta::parse(many.as_bytes());
        assert!(matches!(e, Err(ZarrError::Limit(_))), "{e:?}");
    }

    #[test]
    fn bytes_are_written_as_raw_bytes_and_both_forms_read() {
        let l = layout("bytes(3)[4,5] block,* on 2x1");
        let j = to_json(
            &l,
            "bytes(3)[4,5] block,* on 2x1",
            &[2, 5],
            None,
            Compressor::None,
        );
        let v: Value = serde_json::from_slice(&j).unwrap_or_default();
        assert_eq!(
            v["data_type"],
            json!({"name": "raw_bytes", "configuration": {"length_bytes": 3}})
        );
        assert_eq!(v["fill_value"], json!("AAAA"));
        assert_eq!(v["codecs"][0], json!({"name": "bytes"}));
        let m = ZarrMeta::parse(&j).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            (m.dtype, m.fill.as_slice()),
            (DType::Bytes(3), &[0u8; 3][..])
        );
        assert_eq!(m.data_type, "raw_bytes(length_bytes=3)");
        // What Spools wrote before: r24, with a list of bytes as fill value.
        let mut old = v.clone();
        old["data_type"] = json!("r24");
        old["fill_value"] = json!([1, 2, 3]);
        let m = ZarrMeta::parse(old.to_string().as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(
            (m.dtype, m.fill.as_slice()),
            (DType::Bytes(3), &[1u8, 2, 3][..])
        );
        assert_eq!(m.data_type, "r24");
        let b64 = String::from_utf8_lossy(&j).replace(r#""AAAA""#, r#""AQID""#);
        let m = ZarrMeta::parse(b64.as_bytes()).unwrap_or_else(|e| unreachable!("{e}"));
        assert_eq!(m.fill, [1, 2, 3]);
        for bad in [
            r#""AQ==""#,
            r#""AQIDBA==""#,
            r#""A!ID""#,
            r#"[1, 2]"#,
            r#"7"#,
        ] {
            let t = String::from_utf8_lossy(&j).replace(r#""AAAA""#, bad);
            let e = ZarrMeta::parse(t.as_bytes());
            assert!(
                matches!(e, Err(ZarrError::FillValue { .. })),
                "{bad}: {e:?}"
            );
        }
        let t = String::from_utf8_lossy(&j).replace(r#""length_bytes": 3"#, r#""length_bytes": 0"#);
        assert!(matches!(
            ZarrMeta::parse(t.as_bytes()),
            Err(ZarrError::Json(_))
        ));
    }

    #[test]
    fn base64_round_trips() {
        for n in 0..10u8 {
            let b: Vec<u8> = (0..n)
                .map(|i| i.wrapping_mul(97).wrapping_add(200))
                .collect();
            let t = base64_encode(&b);
            assert_eq!(t.len() % 4, 0);
            assert_eq!(base64_decode(&t).as_deref(), Some(&b[..]), "{t}");
            assert_eq!(
                base64_decode(t.trim_end_matches('=')).as_deref(),
                Some(&b[..])
            );
        }
        assert_eq!(base64_encode(b"abcdef"), "YWJjZGVm");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_decode("YQ").as_deref(), Some(&b"a"[..]));
        assert!(base64_decode("Y").is_none() && base64_decode("YQ===").is_none());
    }

    #[test]
    fn errors_are_classified() {
        use crate::error::ErrorKind;
        assert_eq!(ZarrError::Spec("x".into()).kind(), ErrorKind::BadArgument);
        let codec = ZarrError::Codec {
            name: "blosc".into(),
            why: SUPPORTED.into(),
        };
        assert_eq!(codec.kind(), ErrorKind::Unsupported);
        assert_eq!(ZarrError::Json("x".into()).kind(), ErrorKind::Damaged);
    }

    #[test]
    fn specs_parse_and_bad_ones_say_why() {
        assert_eq!(
            parse_spec("chunk=64x64,shard=512x512").ok(),
            Some((vec![64, 64], Some(vec![512, 512]), Compressor::None))
        );
        assert_eq!(
            parse_spec("chunk=8,codec=zstd,level=5").ok(),
            Some((vec![8], None, Compressor::Zstd(5)))
        );
        for bad in [
            "",
            "chunk=0x4",
            "chunk=4x4,shard=6x8",
            "chunk=4,shard=8x8",
            "chunk=4,codec=lz4",
            "chunk=4,level=3",
            "chunk=4,speed=1",
            "chunk=4,codec=gzip,level=12",
        ] {
            assert!(parse_spec(bad).is_err(), "{bad}");
        }
    }
}
