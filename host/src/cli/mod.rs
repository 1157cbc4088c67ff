pub mod r#try;
