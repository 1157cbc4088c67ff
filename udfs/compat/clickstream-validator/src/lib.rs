//! The clickstream validator (`udfs/clickstream-validator`), its source unchanged, built
//! against the `0.1` contract: the host's tests give it the validator's verdict table.

#[path = "../../../clickstream-validator/src/lib.rs"]
mod validator;
