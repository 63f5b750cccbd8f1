//! Handle conversion between C and `int` (`MPI_Comm_toint`, `MPI_Comm_fromint`, ...):
//! every handle of this library, predefined or made, fits an `int`, so both directions
//! are exact.

use std::ffi::c_int;

use crate::abi::*;

macro_rules! convert {
    ($($to:ident, $from:ident, $ty:ident);* $(;)?) => {$(
        #[doc = concat!("`", stringify!($to), "`: the handle as an `int`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $to(h: $ty) -> c_int {
            h as c_int
        }

        #[doc = concat!("`", stringify!($from), "`: the handle of an `int` from `", stringify!($to), "`.")]
        #[no_mangle]
        pub unsafe extern "C" fn $from(i: c_int) -> $ty {
            i as u32 as $ty
        }
    )*};
}

convert! {
    MPI_Comm_toint, MPI_Comm_fromint, MPI_Comm;
    MPI_Errhandler_toint, MPI_Errhandler_fromint, MPI_Errhandler;
    MPI_File_toint, MPI_File_fromint, MPI_File;
    MPI_Group_toint, MPI_Group_fromint, MPI_Group;
    MPI_Info_toint, MPI_Info_fromint, MPI_Info;
    MPI_Message_toint, MPI_Message_fromint, MPI_Message;
    MPI_Op_toint, MPI_Op_fromint, MPI_Op;
    MPI_Request_toint, MPI_Request_fromint, MPI_Request;
    MPI_Session_toint, MPI_Session_fromint, MPI_Session;
    MPI_Type_toint, MPI_Type_fromint, MPI_Datatype;
    MPI_Win_toint, MPI_Win_fromint, MPI_Win;
}
