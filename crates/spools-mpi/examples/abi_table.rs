//! Prints every constant, `sizeof` and `MPI_Status` offset of Spools' standard ABI, one
//! `KIND NAME VALUE` line each: the ABI test (tests/test_abi.py) compares them with a C
//! program compiled against another implementation's `mpi_abi.h`.

fn main() {
    for (name, value) in mpi_abi::abi::all_constants() {
        println!("const {name} {value}");
    }
    for (name, size) in mpi_abi::abi::SIZES {
        println!("sizeof {name} {size}");
    }
    for (name, off) in mpi_abi::abi::STATUS_OFFSETS {
        println!("offsetof {name} {off}");
    }
}
